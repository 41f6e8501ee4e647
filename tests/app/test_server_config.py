"""Safe server defaults: the dashboard listens on 127.0.0.1 only and shows visitors no tracebacks.

Read from `.streamlit/config.toml` and the Makefile's `run` target, then checked for real: `streamlit run app.py`
with the repository's config on a free port, and the kernel's table of listening sockets says where it listens.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex)


def test_config_binds_to_loopback_and_hides_error_details():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    # Streamlit 1.67: "none" shows a generic message; the old `false` still means "stacktrace" (tracebacks shown)
    assert config["client"]["showErrorDetails"] == "none"
    assert config["client"]["toolbarMode"] == "viewer"  # no Deploy button, no developer options for visitors


def test_make_run_binds_to_loopback_unless_asked():
    makefile = (ROOT / "Makefile").read_text()
    run = re.search(r"^run:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "--server.address $(ADDRESS)" in run
    assert re.search(r"^ADDRESS\s*\?=\s*127\.0\.0\.1\s*$", makefile, re.M)


def test_no_file_watcher_in_the_config_nor_in_make_run():
    """Watching the checkout overflowed inotify's queue and took 45% of the server's CPU (issue 31): off."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"
    run = re.search(r"^run:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert "--server.fileWatcherType none" in run


def listening(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp and tcp6) of the sockets listening on `port`."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.append(address)
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's table of listening sockets")
def test_streamlit_listens_on_loopback_only(tmp_path):
    port = free_port()
    streamlit = Path(sys.executable).with_name("streamlit")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}  # no user-level config mixed in
    server = subprocess.Popen([str(streamlit), "run", "app.py", "--server.port", str(port)], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not listening(port) and time.time() < deadline and server.poll() is None:
            time.sleep(0.2)
        addresses = listening(port)
        assert addresses, "the server did not start listening"
        assert set(addresses) == {LOOPBACK}, addresses  # not 00000000 (0.0.0.0) nor the IPv6 wildcard
    finally:
        server.terminate()
        server.wait(timeout=30)

"""`mia app`: serves this checkout's dashboard from any folder, on loopback unless told otherwise, and says which extra
to install when Streamlit is missing (the installed wheel is tested in tests/packaging/test_wheel.py)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mia_core.cli.dashboard import dashboard_script, is_loopback, streamlit_command

from tests.app.test_server_config import LOOPBACK, listening
from tests.support.cli_runner import run_cli
from tests.support.dashboard import _wait_healthy as wait_healthy
from tests.support.ports import free_port
from tests.support.process_group import stop_group

ROOT = Path(__file__).resolve().parents[2]
#: `mia app` where `import streamlit` finds nothing (a None in sys.modules is how Python marks a module as missing).
WITHOUT_STREAMLIT = "import sys; sys.modules['streamlit'] = None; sys.argv = ['mia', 'app']; " \
                    "from mia_core.cli import main; main()"


def test_without_streamlit_it_names_the_extra():
    done = subprocess.run([sys.executable, "-c", WITHOUT_STREAMLIT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == 'error: the dashboard needs the extra: pip install "mia-lens[dashboard]"\n'


def test_a_checkout_serves_its_own_app_with_this_interpreters_streamlit():
    assert dashboard_script() == ROOT / "app.py"
    assert streamlit_command(ROOT / "app.py", "127.0.0.1", 8600) == [
        sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", "127.0.0.1",
        "--server.port", "8600"]


@pytest.mark.parametrize("address, loopback", [("127.0.0.1", True), ("127.1.2.3", True), ("localhost", True),
                                                ("::1", True), ("0.0.0.0", False), ("::", False),
                                                ("192.168.1.5", False), ("example.org", False)])
def test_only_loopback_addresses_count_as_this_machine(address, loopback):
    assert is_loopback(address) is loopback


def test_a_port_out_of_range_is_a_usage_error():
    code, _, err = run_cli("app", "--port", "70000")
    assert code == 2 and "--port" in err and "65535" in err


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="reads Linux's table of listening sockets")
def test_mia_app_serves_the_dashboard_from_another_folder(tmp_path):
    port = free_port()
    log = tmp_path / "app.log"
    mia = Path(sys.executable).with_name("mia")
    with log.open("w") as out:
        server = subprocess.Popen([str(mia), "app", "--port", str(port)], cwd=tmp_path, stdout=out,
                                  stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                                  start_new_session=True)  # its own process group: stopped whole below
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, log)
        assert set(listening(port)) == {LOOPBACK}
    finally:
        stop_group(server)

"""The dashboard as a real server for the browser tests: started on a free loopback port and waited for until it
answers its health check, so a page is never opened on a server still starting (CI's loaded machine refused it)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
#: Seconds a starting dashboard may take to answer (imports and the first page's modules on a loaded 2-core machine).
READY_S = 120


@contextmanager
def running_dashboard(env: dict[str, str], log_path: Path, script: Path = ROOT / "app.py") -> Iterator[str]:
    """The dashboard (or another Streamlit `script`) with these extra environment variables (offline, no file
    watcher), its output in `log_path`; yields its URL once `/_stcore/health` answers, and stops it on leaving."""
    port = free_port()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=script.parent, env={**os.environ, "HF_HUB_OFFLINE": "1", **env}, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_healthy(url, proc, log_path)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _wait_healthy(url: str, proc: subprocess.Popen, log_path: Path) -> None:
    """Return once the server answers its health check; fail with its log if it exits or stays silent."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the dashboard exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the dashboard did not answer within {READY_S} s:\n{log_path.read_text()[-3000:]}")

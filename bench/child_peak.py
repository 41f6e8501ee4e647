"""Run a command in a child process and read its peak RSS, wall time and exit status (the memory benches share it)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path


def run_measured(command: list[str], cwd: Path, env: dict, timeout: float) -> tuple[float, float, int, str]:
    """(peak RSS in MB, wall seconds, exit status, stderr) of `command`; a run past `timeout` is killed and reported."""
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout
    while True:  # poll so a run past the timeout is stopped (and reported) rather than left running
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            child.kill()
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.05)
    wall = time.perf_counter() - start
    return usage.ru_maxrss / 1024, wall, os.waitstatus_to_exitcode(status), child.stderr.read().decode()

"""Stopping a server the tests started in a process group of its own (`start_new_session=True`): whatever it spawned
stops with it, so no test leaves a process behind."""
from __future__ import annotations

import os
import signal
import subprocess


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM to `proc`'s whole process group, SIGKILL if it is still there after `timeout` seconds."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:  # the group is gone already
        proc.wait(timeout=timeout)
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)

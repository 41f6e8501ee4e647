"""Waiting on a running audit process until its results store holds a number of scored snippets (or computed
extraction units)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Callable

from mia_core.runs.extraction_units import KIND, ExtractionUnits
from mia_core.runs.store import ResultsStore


def wait_scored(store_path: Path, proc: subprocess.Popen, at_least: int, deadline_s: float, poll_s: float = 0.2) -> int:
    """Scored snippets in the store once they reach `at_least`, or when `proc` ends or the deadline passes."""
    def scored() -> int:
        runs = ResultsStore(store_path).runs()
        return int(runs["n_scored"].sum()) if len(runs) else 0

    return _wait(store_path, proc, scored, at_least, deadline_s, poll_s)


def wait_units(store_path: Path, proc: subprocess.Popen, at_least: int, deadline_s: float, poll_s: float = 0.2) -> int:
    """Computed extraction units in the store (every extraction run's) once they reach `at_least`, or when `proc`
    ends or the deadline passes."""
    def done() -> int:
        runs = ResultsStore(store_path).runs(kind=KIND)
        return sum(ExtractionUnits(store_path).progress(r)[0] for r in runs["run_id"])

    return _wait(store_path, proc, done, at_least, deadline_s, poll_s)


def _wait(store_path: Path, proc: subprocess.Popen, count: Callable[[], int], at_least: int, deadline_s: float, poll_s: float) -> int:
    """Poll `count()` until it reaches `at_least`, `proc` ends or the deadline passes; the last count."""
    deadline, counted = time.time() + deadline_s, 0
    while time.time() < deadline and proc.poll() is None:
        if store_path.exists():
            try:
                counted = count()
            except Exception:  # the writer holds the file for a moment
                counted = 0
            if counted >= at_least:
                return counted
        time.sleep(poll_s)
    return counted

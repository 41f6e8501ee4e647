"""Waiting on a running audit process until its results store holds a number of scored snippets (or computed
extraction units)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from mia_core.runs.extraction_units import KIND, ExtractionUnits
from mia_core.runs.store import ResultsStore


def wait_scored(store_path: Path, proc: subprocess.Popen, at_least: int, deadline_s: float, poll_s: float = 0.2) -> int:
    """Scored snippets in the store once they reach `at_least`, or when `proc` ends or the deadline passes."""
    deadline, scored = time.time() + deadline_s, 0
    while time.time() < deadline and proc.poll() is None:
        if store_path.exists():
            try:
                runs = ResultsStore(store_path).runs()
                scored = int(runs["n_scored"].sum()) if len(runs) else 0
            except Exception:  # the writer holds the file for a moment
                scored = 0
            if scored >= at_least:
                return scored
        time.sleep(poll_s)
    return scored


def wait_units(store_path: Path, proc: subprocess.Popen, at_least: int, deadline_s: float, poll_s: float = 0.2) -> int:
    """Computed extraction units in the store (every extraction run's) once they reach `at_least`, or when `proc`
    ends or the deadline passes."""
    deadline, done = time.time() + deadline_s, 0
    while time.time() < deadline and proc.poll() is None:
        if store_path.exists():
            try:
                store = ResultsStore(store_path)
                runs = store.runs(kind=KIND)
                done = sum(ExtractionUnits(store_path).progress(r)[0] for r in runs["run_id"])
            except Exception:  # the writer holds the file for a moment
                done = 0
            if done >= at_least:
                return done
        time.sleep(poll_s)
    return done

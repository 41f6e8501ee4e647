"""Background audit jobs for the dashboard: a thread per run that outlives page reruns and sessions.

The job writes its scores to the results store as it goes; pages read progress from the store, so
they can reattach to a run by id after a rerun, a reload, or when the run was started from the CLI.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import streamlit as st

from mia_core.audit.jobs import run_scoring
from mia_core.model.language_model import LanguageModel
from mia_core.runs.store import ResultsStore


@dataclass
class JobThread:
    """A running (or finished) scoring thread and the error it ended with, if any."""

    thread: threading.Thread
    error: str | None = None


@st.cache_resource(show_spinner=False)
def job_threads() -> dict[str, JobThread]:
    """Process-wide registry of scoring threads, by run id (shared by every session of the server)."""
    return {}


def start_scoring(store: ResultsStore, run_id: str, lm: LanguageModel) -> JobThread:
    """Score the run's pending snippets in a daemon thread, unless a thread for it is already running."""
    threads = job_threads()
    current = threads.get(run_id)
    if current is not None and current.thread.is_alive():
        return current

    def work() -> None:
        try:
            run_scoring(store, run_id, lm)
        except Exception as err:  # shown on the page; the store keeps every finished score
            job.error = f"{type(err).__name__}: {err}"

    job = JobThread(threading.Thread(target=work, name=f"audit-{run_id}", daemon=True))
    threads[run_id] = job
    job.thread.start()
    return job


def job_state(run_id: str) -> JobThread | None:
    """This server's thread for the run, if it started one."""
    return job_threads().get(run_id)

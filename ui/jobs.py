"""Background audit jobs for the dashboard: a thread per run that outlives page reruns and sessions.

The job writes its scores to the results store as it goes; pages read progress from the store, so
they can reattach to a run by id after a rerun, a reload, or when the run was started from the CLI.
At most `MAX_BACKGROUND_JOBS` score at once in one server; a later one waits for a free slot, and says so.
Also here: a session's upload folder (made once, removed with the session) and error text without server paths.

Speed: Streamlit runs a full garbage collection (`gc.collect(2)`) after every script run, fragment reruns
included. With a model, torch and pandas loaded that walks about 5·10^5 objects, 1.6–1.8 s holding the GIL
(measured on the 2-core CPU machine), which starved the scoring thread: with the progress fragment polling every
second, a 12-snippet demo audit took 877 s from the page, where a plain thread or process had scored it in 46–48 s
minutes before. Starting a job therefore freezes the objects alive then (modules, the loaded model: they live as
long as the server) out of the collector's reach (`gc.freeze`), so a collection walks only what was made since;
`bench/audit_page.py` measures the page against the CLI.
"""
from __future__ import annotations

import atexit
import gc
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import streamlit as st

from mia_core.audit.jobs import audit_result, run_scoring
from mia_core.limits import MAX_BACKGROUND_JOBS
from mia_core.model.language_model import LanguageModel
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

#: Frozen objects are never collected; at exit they are handed back, so the interpreter's last collection frees them
#: (else nanobind, under DuckDB, reports them as leaked).
atexit.register(gc.unfreeze)
#: Serialises starting a job, so two sessions starting the same run get one thread.
_START = threading.Lock()
#: An absolute path (POSIX) in a message: shown as its last part only (not after a letter, `.`, `:` or `/`: URLs).
_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s/'\"()<>:,]+/)+([^\s/'\"()<>:,]*)")


@dataclass
class JobThread:
    """A background thread, the error it ended with if any, its state ("waiting" for a slot, "running", "done")
    and when it was started (`time.time()`)."""

    thread: threading.Thread
    error: str | None = None
    state: str = "waiting"
    started: float = field(default_factory=time.time)


@st.cache_resource(show_spinner=False)
def job_threads() -> dict[str, JobThread]:
    """Process-wide registry of scoring threads, by run id (shared by every session of the server)."""
    return {}


@st.cache_resource(show_spinner=False)
def job_slots() -> threading.BoundedSemaphore:
    """The server's MAX_BACKGROUND_JOBS slots for scoring (one model and device shared by every session)."""
    return threading.BoundedSemaphore(MAX_BACKGROUND_JOBS)


def public_message(text: str) -> str:
    """`text` with every absolute server path cut to its last part (a visitor sees file names, not folders)."""
    return _PATH.sub(r"\1", text)


def _run(job: JobThread, work: Callable[[], None]) -> None:
    """Wait for a slot, then do the work; its error is kept for the page (the store keeps every finished score)."""
    with job_slots():
        job.state = "running"
        try:
            work()
        except Exception as err:
            job.error = public_message(f"{type(err).__name__}: {err}")
        finally:
            job.state = "done"


def start_job(run_id: str, work: Callable[[], None]) -> JobThread:
    """Run `work` in a daemon thread once a slot is free, unless a thread for this run is already alive."""
    with _START:
        threads = job_threads()
        current = threads.get(run_id)
        if current is not None and current.thread.is_alive():
            return current
        job = JobThread(threading.Thread(target=lambda: _run(job, work), name=f"audit-{run_id}", daemon=True))
        threads[run_id] = job
    gc.freeze()  # see the module's docstring: reruns' full collections no longer walk the model and the modules
    job.thread.start()
    return job


@st.cache_resource(show_spinner=False)
def frozen_for() -> set[str]:
    """Keys (run ids) for which `freeze_once` has frozen this server's objects."""
    return set()


def freeze_once(key: str) -> None:
    """`gc.freeze()` the first time `key` asks (a page starting to watch a run): once per run, so the little cyclic
    garbage alive at that moment is all that freezing can keep from being collected."""
    keys = frozen_for()
    if key not in keys:
        keys.add(key)
        gc.freeze()


def start_scoring(store: ResultsStore, run_id: str, lm: LanguageModel, first_batch: int | None = None,
                  then: Callable[[], None] | None = None) -> JobThread:
    """Score the run's pending snippets in the background (`start_job`), then analyse it with its own settings, as
    `mia audit-books` does, so the store says "done" by the time the page shows the results. `first_batch`: snippets
    in the first batch (later ones double up to the run's batch size), so the first result shows soon. `then`: more
    work of the same job once the run is analysed (the audit's extraction pass)."""
    def work() -> None:
        run_scoring(store, run_id, ModelRef.of(lm), lm=lm, first_batch=first_batch)
        audit_result(store, run_id)
        if then is not None:
            then()
    return start_job(run_id, work)


def job_state(run_id: str) -> JobThread | None:
    """This server's thread for the run, if it started one."""
    return job_threads().get(run_id)


def latest_job() -> str | None:
    """The run id of this server's most recently started job that is still alive, a running one before a waiting one."""
    alive = [(job.state == "running", job.started, run_id) for run_id, job in list(job_threads().items())
             if job.thread.is_alive()]
    return max(alive)[2] if alive else None


def running_jobs() -> int:
    """Background jobs of this server scoring now."""
    return sum(job.state == "running" and job.thread.is_alive() for job in list(job_threads().values()))


def waiting_message(job: JobThread | None) -> str | None:
    """"waiting for a free slot (1 running)" while the job waits for one, else None."""
    if job is None or job.state != "waiting" or not job.thread.is_alive():
        return None
    return f"waiting for a free slot ({running_jobs()} running)"


def session_folder(key: str, prefix: str) -> Path:
    """This session's temporary folder under `key`: made once per session (not per rerun), removed with the session.

    The `TemporaryDirectory` kept in session state deletes the folder when the session's state is dropped (its
    finalizer), or at the latest when the server exits.
    """
    folder = st.session_state.get(key)
    if not isinstance(folder, tempfile.TemporaryDirectory):
        folder = st.session_state[key] = tempfile.TemporaryDirectory(prefix=prefix)
    return Path(folder.name)

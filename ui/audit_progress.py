"""Book-audit runs on the page: the shared results store, the runs in it, a running job's live progress, and an
estimate of a run's time before it starts."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from mia_core.audit.jobs import AuditSettings
from mia_core.audit.snippets import book_snippets
from mia_core.audit.source_sizes import BYTES_PER_WORD, estimated_words
from mia_core.audit.sources import DEMO_SETS, Source, read_books, read_calibration
from mia_core.audit.timing import (
    about, audit_seconds, first_batch_size, progress_line, snippet_count, snippet_tokens,
)
from mia_core.inputs.tables import InputError
from mia_core.runs.store import ResultsStore, default_store_path
from mia_core.runs.store_db import now
from ui.jobs import freeze_once, job_state, latest_job, public_message, running_jobs, waiting_message
from ui.model_speeds import model_speeds, speed_or_start, wait_for_speed
from ui.models import LOADED, cached_model

#: Seconds between two reads of a running job's progress from the store (the elapsed time and the ETA count on between
#: batches; each read reruns a fragment, and every rerun costs the scoring thread some CPU: 2 s measured 1.25× the
#: CLI's time).
POLL_S = 5.0
RUNS_COLUMNS = ["run_id", "status", "message", "model", "method", "backend", "n_scored", "n_snippets", "updated_at"]


@st.cache_resource(show_spinner=False)
def store_at(path: str) -> ResultsStore:
    return ResultsStore(path)


def results_store() -> ResultsStore:
    """The shared results store (`$MIA_LENS_STORE`; the CLI writes to the same file by default)."""
    return store_at(str(default_store_path()))


def reattach(stored: set[str]) -> None:
    """A session with no run chosen (and no `?run=` link) shows this server's latest running, else waiting, job
    (one of the `stored` run ids)."""
    if st.session_state.get("audit_run_id") or "run" in st.query_params:
        return
    run_id = latest_job()
    if run_id in stored:
        st.session_state["audit_run_id"] = run_id


def runs_table() -> None:
    """The store's book-audit runs with their status and counts as they are now (a waiting job of this server says so)."""
    runs = results_store().runs(kind="book-audit")[RUNS_COLUMNS].copy()
    for i, run_id in runs["run_id"].items():
        if waiting_message(job_state(run_id)):
            runs.at[i, "status"] = "waiting"
    st.dataframe(runs, hide_index=True, key="audit_runs_table")


def runs_ui() -> None:
    """Reattach to a running job (`reattach`), then earlier runs in the shared store (from this dashboard or the CLI);
    pick one to open. The table reads the store again every `POLL_S` while a run is being scored."""
    runs = results_store().runs(kind="book-audit")
    if runs.empty:
        return
    reattach(set(runs["run_id"]))
    active = bool((runs["status"] == "running").any()) or latest_job() is not None
    with st.expander(f"Runs in the results store ({len(runs)})", expanded="audit_run_id" not in st.session_state):
        st.fragment(runs_table, run_every=POLL_S if active else None)()
        chosen = st.selectbox("Open run", [""] + runs["run_id"].tolist(), key="audit_open")
        if chosen and st.button("Open", key="audit_open_button"):
            st.session_state["audit_run_id"] = chosen


@st.fragment(run_every=POLL_S)
def progress_ui(run_id: str) -> None:
    """Progress read from the store, batch by batch, with an ETA; reruns the page once the run is scored (and, when
    this server scores it, analysed)."""
    freeze_once(run_id)  # a page watching a CLI job must not slow it either (see ui.jobs)
    job = job_state(run_id)
    if job is not None and job.error:
        st.error(f"The run stopped: {job.error}. Finished scores are kept; start it again to resume.")
        return
    waiting = waiting_message(job)
    if waiting:  # another audit holds the server's scoring slot (MAX_BACKGROUND_JOBS)
        st.info(f"Run {run_id}: {waiting}; it starts by itself when the running audit ends.")
        return
    progress = results_store().run_progress(run_id)
    alive = job is not None and job.thread.is_alive()
    analysing = " · analysing" if alive and progress.scored == progress.planned else ""
    line = progress_line(progress, now())  # elapsed and ETA counted to now: they move between batches too
    st.progress(progress.scored / max(progress.planned, 1), text=f"Run {run_id}: {line}{analysing}")
    if not alive and progress.scored == progress.planned:
        st.rerun()
    if not alive and progress.status == "interrupted":
        st.warning(f"Run {run_id} was interrupted: {public_message(results_store().run(run_id)['message'])}.")
    elif not alive and progress.status == "running":
        st.caption("Another process (e.g. `mia audit-books`) is scoring this run; its progress is read from the "
                   "results store.")
    elif not alive:
        st.caption("No scoring thread of this dashboard is working on this run (it may run from the CLI). "
                   "Start it here with the button below to resume.")


def first_batch(run_id: str, lm) -> int:
    """Snippets in the run's first batch: what its model's measured speed scores in `timing.FIRST_BATCH_S`, or 1 when
    the speed was not measured on this server; later batches double up to the run's batch size."""
    run = results_store().run(run_id)
    settings, speed = AuditSettings(**run["config"]), model_speeds().get(run["model"])
    if speed is None:
        return 1
    return first_batch_size(speed, settings.snippet_words, lm.max_length, settings.batch_snippets)


def source_signature(source: Source) -> tuple:
    """What identifies a source's contents: a demo set's name, else every file's path, size and modification time."""
    if isinstance(source, str) and source in DEMO_SETS:
        return (source,)
    files = []
    for path in source if isinstance(source, list) else [Path(source)]:
        files += [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)


@st.cache_data(show_spinner=False, max_entries=32)
def word_counts(signature: tuple, role: str, _source: Source) -> tuple[int, ...]:
    """Words per book of a source, once per contents: a demo set's books counted; files estimated from their sizes
    (`audit.source_sizes`: only a PDF or EPUB is read), so an upload of gigabytes of text costs no reading here."""
    if isinstance(_source, str) and _source in DEMO_SETS:
        books, _ = (read_calibration if role == "calibration" else read_books)(_source)
        return tuple(len(book.text.split()) for book in books)
    return tuple(estimated_words(_source))


def cost_estimate_ui(spec: str | None, calibration: Source | None, books: Source | None, settings: AuditSettings) -> None:
    """One line before Run: snippets × tokens per snippet × this model's measured seconds per token ≈ the run's time.

    The speed is measured once per model on this server (a short pass over a fixed text), in the background and never
    while an audit is scoring (`ui.model_speeds`); nothing is drawn until the sidebar's model has loaded, or while the
    inputs cannot be read.
    """
    if spec is None or calibration is None or books is None or st.session_state.get(LOADED) != spec:
        return
    try:
        counts = (word_counts(source_signature(calibration), "calibration", calibration)
                  + word_counts(source_signature(books), "audit", books))
    except (InputError, ValueError, OSError):  # shown when Run is pressed; no estimate meanwhile
        return
    n = snippet_count(counts, settings.snippet_words, settings.max_snippets_per_book)
    lm = cached_model(spec)
    if spec not in model_speeds():
        if running_jobs():
            st.caption(f"{n:,} snippets; the time estimate comes once the running audit ends (the model's speed is "
                       "measured when nothing else is scoring).")
            return
        if speed_or_start(spec, lm) is None:  # measured in the background: the page is drawn meanwhile
            wait_for_speed(spec, n)
            return
    speed = model_speeds()[spec]
    sized = [s for s in (calibration, books) if not (isinstance(s, str) and s in DEMO_SETS)]
    cached = 0 if sized else lm.cached_count(demo_snippet_texts(settings.snippet_words, settings.max_snippets_per_book),
                                             settings.bos, "truncate")  # read, not computed
    seconds = audit_seconds(n - cached, settings.snippet_words, speed, lm.max_length)
    tokens = snippet_tokens(settings.snippet_words, speed, lm.max_length)
    basis = (f" Uploaded books' words are estimated from their sizes (≈ {BYTES_PER_WORD:g} bytes a word; PDF and EPUB "
             "counted); the run counts them exactly.") if sized else ""
    todo = f"{n - cached:,} of {n:,} snippets to score ({cached:,} already in this server's statistics cache)" \
        if cached else f"{'about ' if sized else ''}{n:,} snippets"
    st.caption(f"Estimate: {todo} × about {tokens:,} tokens × {speed.seconds_per_token * 1000:.3g} ms per token "
               f"({spec} on this machine, measured once) ≈ {about(seconds)} of scoring.{basis}")


@st.cache_data(show_spinner=False, max_entries=8)
def demo_snippet_texts(words: int, max_per_book: int | None) -> tuple[str, ...]:
    """The texts of every snippet an audit of the demo plays scores (calibration and audited, as the run cuts them):
    what the estimate looks up in the statistics cache."""
    plays = read_calibration("demo-books")[0] + read_books("demo-books")[0]
    return tuple(snippet.text for snippet in book_snippets(plays, words, max_per_book)[0])

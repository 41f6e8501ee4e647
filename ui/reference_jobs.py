"""Known non-members scored in the background for Explore's p-value: the page shows its result at once and says, where
the p-value will be, how far the scoring is ("p-value: scoring 47 of 120 known non-members, ETA 1 min 10 s"); when
the set is kept (`mia_core.reference.cache`) the page reruns and draws the p-value. One set is scored at a time on a
server: others wait for it (a bound on what visitors can start); a set scored once serves every later text, session
and visitor."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import streamlit as st

from mia_core.model.language_model import LanguageModel
from mia_core.reference import ReferenceSet, TextsProgress, cached_reference, kept_reference
from ui.jobs import public_message
from ui.markdown import md
from ui.model_work import model_turn_quiet

#: Seconds between two looks at a scoring reference set (a fragment rerun, only while it scores).
POLL_S = 1.0


@dataclass
class ReferenceJob:
    """One reference set being scored: for which model, how far, and how it ended."""

    model: str
    total: int
    progress: TextsProgress | None = None
    error: str | None = None
    done: bool = False
    thread: threading.Thread | None = field(default=None, repr=False)


@st.cache_resource(show_spinner=False)
def reference_jobs() -> dict[tuple, ReferenceJob]:
    """This server's reference jobs, by what they score (model fingerprint, texts, methods and setting)."""
    return {}


def running_job() -> ReferenceJob | None:
    """The reference set this server is scoring now, if any."""
    return next((job for job in reference_jobs().values() if not job.done), None)


def _score(job: ReferenceJob, lm: LanguageModel, texts: list[str], methods: list[str], setting: dict) -> None:
    """The thread's work: the model's turn (page requests keep their line), then the set scored and kept."""
    try:
        with model_turn_quiet() as check:
            cached_reference(lm, texts, methods, progress=check, on_texts=lambda p: setattr(job, "progress", p),
                             **setting)
    except Exception as err:  # noqa: BLE001  (the page says why; the rest of the result stays)
        job.error = public_message(str(err)) or type(err).__name__
    finally:
        job.done = True


def reference_or_start(spec: str, lm: LanguageModel, texts: list[str], methods: list[str],
                       setting: dict) -> tuple[ReferenceSet | None, tuple]:
    """(the kept reference set, or None while it is scored in the background, its job's key); the job is started
    here unless another set is being scored (then this one starts on a later run, once that one is done)."""
    kept = kept_reference(lm, texts, methods, **setting)
    key = (lm.fingerprint, tuple(texts), tuple(methods), repr(sorted(setting.items())))
    if kept is not None:
        return kept, key
    jobs = reference_jobs()
    job = jobs.get(key)
    if (job is None or (job.done and job.error is None)) and running_job() is None:
        job = jobs[key] = ReferenceJob(spec, len(texts))
        job.thread = threading.Thread(target=_score, args=(job, lm, texts, methods, setting), daemon=True,
                                      name="mia-reference")
        job.thread.start()
    return None, key


def status_line(key: tuple, what: str) -> str:
    """Where the p-value stands, in words, for the page's result."""
    job = reference_jobs().get(key)
    if job is None:
        other = running_job()
        who = f" for {md(other.model)}" if other is not None else ""
        return f"**p-value**: waits for the known non-members being scored{who} (one set at a time on this server) …"
    if job.error is not None:
        return f"**p-value**: not available, scoring {what} failed: {md(job.error)}"
    words = job.progress.words() if job.progress is not None else f"0 of {job.total:,} texts, waiting for the model"
    return (f"**p-value**: scoring {what} — {words}. The scores below are final; their p-values follow here (the "
            "known non-members are scored once per model and setting, then kept).")


@st.fragment(run_every=POLL_S)
def reference_status(key: tuple, what: str) -> None:
    """The p-value's place while its reference set is scored; once the set is kept (or failed), the page reruns."""
    job = reference_jobs().get(key)
    if job is not None and job.done and job.error is None or job is None and running_job() is None:
        st.rerun()  # the set is kept (the p-value can be drawn), or the set it waited for is done (this one starts)
    st.info(status_line(key, what))


def pending_reference_ui(key: tuple, what: str) -> None:
    """The p-value's place while its set is scored (polled), or why it failed (drawn once)."""
    job = reference_jobs().get(key)
    if job is not None and job.error is not None:
        st.error(status_line(key, what))
    else:
        reference_status(key, what)

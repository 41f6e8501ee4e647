"""Each model's measured speed on this server, measured once in the background: the Book audit page opens at once and
its time estimate follows when the measurement is back, never blocking the page."""
from __future__ import annotations

import threading

import streamlit as st

from mia_core.audit.timing import ModelSpeed, measure_speed
from mia_core.model.language_model import LanguageModel
from ui.jobs import public_message
from ui.model_work import model_turn_quiet

#: Seconds between two looks at whether a measurement is back (a fragment rerun: cheap, only while measuring).
POLL_S = 1.0


@st.cache_resource(show_spinner=False)
def model_speeds() -> dict[str, ModelSpeed]:
    """Each model's measured speed on this server (spec → `ModelSpeed`), measured once."""
    return {}


@st.cache_resource(show_spinner=False)
def measurements() -> dict[str, dict]:
    """spec → {"thread": the measuring thread, "error": why it failed, or None}: at most one measurement per model."""
    return {}


def _measure(spec: str, lm: LanguageModel, record: dict) -> None:
    """The thread's work: take the model's turn (no page's work runs meanwhile, so the timing is the model's own)."""
    try:
        with model_turn_quiet():
            model_speeds()[spec] = measure_speed(lm)
    except Exception as err:  # noqa: BLE001  (shown on the page instead of an estimate; the audit still runs)
        record["error"] = public_message(str(err)) or type(err).__name__


def speed_or_start(spec: str, lm: LanguageModel) -> ModelSpeed | None:
    """The model's measured speed, or None while it is measured in the background (the measurement started once)."""
    if spec in model_speeds():
        return model_speeds()[spec]
    running = measurements()
    record = running.get(spec)
    if record is None or (not record["thread"].is_alive() and record["error"] is None):  # none yet, or one lost
        record = {"error": None}
        record["thread"] = threading.Thread(target=_measure, args=(spec, lm, record), daemon=True,
                                            name=f"mia-speed-{spec[:40]}")
        running[spec] = record
        record["thread"].start()
    return model_speeds().get(spec)


def measurement_error(spec: str) -> str | None:
    """Why the model's speed could not be measured, if it could not."""
    record = measurements().get(spec)
    return None if record is None else record["error"]


@st.fragment(run_every=POLL_S)
def wait_for_speed(spec: str, snippets: int) -> None:
    """While the speed is measured: a line saying so; once it is back, the page reruns and draws the estimate."""
    if spec in model_speeds():
        st.rerun()
    if error := measurement_error(spec):
        st.caption(f"{snippets:,} snippets; no time estimate: {spec}'s speed could not be measured ({error}).")
        return
    st.caption(f"{snippets:,} snippets; the time estimate follows in a moment (measuring {spec}'s speed on this "
               "machine, once, in the background).")

"""Book-audit runs on the page: the shared results store, the runs in it, and a running job's live progress."""
from __future__ import annotations

import streamlit as st

from mia_core.runs.store import ResultsStore, default_store_path
from ui.jobs import job_state, public_message, waiting_message


@st.cache_resource(show_spinner=False)
def store_at(path: str) -> ResultsStore:
    return ResultsStore(path)


def results_store() -> ResultsStore:
    """The shared results store (`$MIA_LENS_STORE`; the CLI writes to the same file by default)."""
    return store_at(str(default_store_path()))


def runs_ui() -> None:
    """Earlier runs in the shared store (from this dashboard or the CLI); pick one to reattach."""
    runs = results_store().runs(kind="book-audit")
    if runs.empty:
        return
    with st.expander(f"Runs in the results store ({len(runs)})", expanded="audit_run_id" not in st.session_state):
        st.dataframe(runs[["run_id", "status", "message", "model", "method", "backend", "n_scored", "n_snippets", "updated_at"]],
                     hide_index=True, key="audit_runs_table")
        chosen = st.selectbox("Open run", [""] + runs["run_id"].tolist(), key="audit_open")
        if chosen and st.button("Open", key="audit_open_button"):
            st.session_state["audit_run_id"] = chosen


@st.fragment(run_every=1.0)
def progress_ui(run_id: str) -> None:
    """Live progress read from the store; reruns the page once every snippet is scored."""
    scored, planned = results_store().progress(run_id)
    job = job_state(run_id)
    if job is not None and job.error:
        st.error(f"The run stopped: {job.error}. Finished scores are kept; start it again to resume.")
        return
    waiting = waiting_message(job)
    if waiting:  # another audit holds the server's scoring slot (MAX_BACKGROUND_JOBS)
        st.info(f"Run {run_id}: {waiting}; it starts by itself when the running audit ends.")
        return
    st.progress(scored / max(planned, 1), text=f"Run {run_id}: {scored:,} of {planned:,} snippets scored")
    if scored == planned:
        st.rerun()
    if (job is None or not job.thread.is_alive()) and results_store().run(run_id)["status"] == "interrupted":
        st.warning(f"Run {run_id} was interrupted: {public_message(results_store().run(run_id)['message'])}.")
    elif job is None or not job.thread.is_alive():
        st.caption("No scoring thread of this dashboard is working on this run (it may run from the CLI). "
                   "Start it here with the button below to resume.")

"""Book audit: per-book contamination against calibration books, as a background job that survives reruns."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import streamlit as st

from mia_core.audit.extraction_runs import extraction_books, plan_extraction, run_extraction
from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.extract import ExtractionSettings
from mia_core.audit.sources import DEMO_SETS, read_audit_inputs
from mia_core.inputs.limits import MAX_ZIP_ENTRIES
from mia_core.inputs.tables import InputError
from mia_core.limits import MAX_UPLOAD_FILES, MAX_UPLOAD_SET_BYTES, is_run_id
from mia_core.model.options import ModelRef
from mia_core.runs.store import StoreUnreadable
from ui.audit_extraction import extraction_ui
from ui.audit_progress import cost_estimate_ui, first_batch, progress_ui, results_store, runs_ui
from ui.audit_results import results_ui
from ui.jobs import job_state, public_message, session_folder, start_scoring
from ui.models import cached_model, pick_one_method
from ui.params import changed, param_widgets
from ui.places import AUDIT_WORDS, AUDITS
from ui.uploads import saved_uploads

#: The method chosen on a first visit (where the model allows it): the Min-K%++ paper's best.
FIRST_CHOSEN = "min_k_pp"
BOOK_TYPES = ["txt", "md", "pdf", "epub", "zip", "csv", "jsonl"]
UPLOAD_HELP = (f"At most {MAX_UPLOAD_FILES} files and {MAX_UPLOAD_SET_BYTES // 1_000_000} MB at once; a zip holds at "
               f"most {MAX_ZIP_ENTRIES:,} entries.")


def sources_ui(workdir: Path):
    """Calibration and books: the demo plays, or uploads. Returns (calibration source, books source) or Nones."""
    left, right = st.columns(2)
    with left:
        st.markdown("**Calibration books** — known members and known non-members")
        cal_choice = st.radio("Calibration", ["demo-books", "upload"], key="audit_cal_choice", horizontal=True,
                              label_visibility="collapsed",
                              format_func={"demo-books": "Demo plays (2 members, 2 held out)", "upload": "Upload"}.get)
        calibration = "demo-books"
        if cal_choice == "upload":
            members = st.file_uploader("Known members", type=BOOK_TYPES[:4], accept_multiple_files=True, key="audit_members",
                                       help=UPLOAD_HELP)
            others = st.file_uploader("Known non-members (e.g. published after the model's cut-off)", type=BOOK_TYPES[:4],
                                      accept_multiple_files=True, key="audit_nonmembers", help=UPLOAD_HELP)
            saved = (saved_uploads(members, workdir / "cal" / "members"),
                     saved_uploads(others, workdir / "cal" / "non_members"))
            if not members or not others:
                st.info("Upload at least one known member and one known non-member book.")
            calibration = None if None in saved else workdir / "cal"
    with right:
        st.markdown("**Books to audit**")
        books_choice = st.radio("Books", ["demo-books", "upload"], key="audit_books_choice", horizontal=True,
                                label_visibility="collapsed",
                                format_func={"demo-books": "Demo plays (8 not used for calibration)", "upload": "Upload"}.get)
        books = "demo-books"
        if books_choice == "upload":
            files = st.file_uploader("Books (.txt .md .pdf .epub, a .zip of them, or a .csv/.jsonl with book and text columns)",
                                     type=BOOK_TYPES, accept_multiple_files=True, key="audit_books", help=UPLOAD_HELP)
            books = saved_uploads(files, workdir / "books")
    return calibration, books


def settings_ui(spec: str | None) -> AuditSettings:
    """Method (one the model allows; book audits take one that needs only the statistics) and its parameters,
    snippet size and threshold rule."""
    c1, c2, c3 = st.columns(3)
    method = pick_one_method(spec, AUDITS.methods(), "audit_method", c1, first=FIRST_CHOSEN)
    drawn = param_widgets([method], "audit", c1)
    params = changed(drawn, keep=["k"] if "k" in drawn[method] else [])  # as the CLI records them: the job id agrees
    words = c2.number_input("Words per snippet", int(AUDIT_WORDS.low), int(AUDIT_WORDS.high), 512, 16,
                            key=AUDIT_WORDS.key,
                            help="The Min-K% book study uses 512; each snippet is truncated to the model's context.")
    max_snippets = c2.number_input("At most this many snippets per book (0 = all)", 0, 100_000, 0, key="audit_max",
                                   help="Spread evenly along the book; cheaper for long books, wider intervals.")
    rule = c3.radio("Threshold", ["fpr", "accuracy"], key="audit_rule", horizontal=True,
                    format_func={"fpr": "hold a target FPR", "accuracy": "max accuracy"}.get)
    target = c3.slider("Target FPR", 0.01, 0.25, 0.05, 0.01, key="audit_fpr", disabled=rule != "fpr")
    seed = c3.number_input("Bootstrap seed", 0, 2**31 - 1, 0, key="audit_seed")
    return AuditSettings(method=method, params=params, snippet_words=int(words),
                         max_snippets_per_book=int(max_snippets) or None, rule=rule, target_fpr=target, seed=int(seed))


def start(spec: str, calibration, books, settings: AuditSettings, extraction: ExtractionSettings | None) -> None:
    """Read the books, plan the run (and its extraction, when asked) in the store and start scoring it in the
    background; the extraction's units are computed by the same job once the snippets are scored."""
    try:
        inputs = read_audit_inputs(books, calibration)
    except InputError as err:
        st.error(public_message(str(err)))  # file names, not the server's upload folder
        return
    lm = cached_model(spec)
    settings = replace(settings, calibration_source=calibration if calibration in DEMO_SETS else "",
                       books_source=books if books in DEMO_SETS else "")  # uploads have no name to repeat
    try:
        run_id = plan_audit(results_store(), ModelRef(spec), inputs.books, inputs.calibration, settings, inputs.problems,
                            lm=lm)
        x_run = None if extraction is None else plan_extraction(
            results_store(), ModelRef(spec), lm, lambda: extraction_books(inputs), extraction, audit_run=run_id)
    except ValueError as err:
        st.error(public_message(str(err)))
        return
    then = None if x_run is None else lambda: run_extraction(results_store(), x_run, ModelRef(spec), lm=lm)
    start_scoring(results_store(), run_id, lm, first_batch(run_id, lm), then)
    st.session_state["audit_run_id"] = run_id


def store_unreadable() -> None:
    """Say that the store cannot be read, instead of a traceback (no server path shown), and end the page."""
    st.error("The results store cannot be read: it is not a DuckDB file of MIA Lens runs, or it is damaged. "
             "Point $MIA_LENS_STORE at another file (or move this one away) and restart the dashboard.")
    st.stop()


def page(spec: str | None, calibration, books, settings: AuditSettings) -> None:
    """Everything of the page that reads the results store: its cost, the Run button, the runs, the chosen run."""
    results_store()  # a foreign or damaged file is refused when opened
    cost_estimate_ui(spec, calibration, books, settings)  # one line: snippets × tokens × this model's seconds per token
    extraction, held = extraction_ui(spec, calibration, books, settings.bos)  # its cost, against the server's bound
    if spec is None:
        st.warning("Load a model in the sidebar first.")
    elif st.button("Run audit", type="primary", disabled=calibration is None or books is None or held is not None,
                   key="audit_run", help=f"Held back: {held}." if held else None):
        start(spec, calibration, books, settings, extraction)
    runs_ui()
    run_id = chosen_run()
    if run_id:
        run_ui(run_id, settings)


def chosen_run() -> str | None:
    """The run this session shows: chosen in the runs table, or named by the page's link (`?run=`), if stored."""
    if "run" in st.query_params and "audit_run_id" not in st.session_state:  # a shared or reloaded link: ?run=<id>
        if is_run_id(st.query_params["run"]):
            st.session_state["audit_run_id"] = st.query_params["run"]
        else:  # shown as code, never as Markdown or HTML
            st.error("The link's run is not a run id (a letter or digit, then letters, digits, '.', '_' or '-'; at "
                     "most 64). It was:")
            st.code(st.query_params["run"][:200], language=None)
    run_id = st.session_state.get("audit_run_id")
    if run_id and run_id not in set(results_store().runs(kind="book-audit")["run_id"]):
        st.error("No book-audit run with this id in the results store:")  # no server path
        st.code(run_id, language=None)
        run_id = None
    return run_id


def run_ui(run_id: str, settings: AuditSettings) -> None:
    """A stored run: its progress while it is scored (resumable here), its results once it is."""
    st.query_params["run"] = run_id
    scored, planned = results_store().progress(run_id)
    if planned == 0:  # only a store written before plans were one transaction can hold such a run
        st.error(f"Run {run_id} has no snippets (its planning was interrupted); start the audit again.")
    elif scored < planned:
        progress_ui(run_id)
        job = job_state(run_id)
        if (job is None or not job.thread.is_alive()) and st.button("Resume scoring here", key="audit_resume"):
            lm = cached_model(results_store().run(run_id)["model"])
            start_scoring(results_store(), run_id, lm, first_batch(run_id, lm))
            st.rerun()
    else:
        results_ui(run_id, settings)


st.title("Book audit")
st.caption("Was this book in the model's training data? Each book is cut into snippets; a threshold is calibrated on "
           "books of known membership; each book gets a contamination rate, a prevalence estimate with an interval and "
           "a test, corrected for many books. Runs are stored as they go and resume where they stopped.")
spec = st.session_state.get("model_spec")
workdir = session_folder("audit_workdir", "mia-audit-")  # once per session, removed with it
calibration, books = sources_ui(workdir)
settings = settings_ui(spec)
try:
    page(spec, calibration, books, settings)
except StoreUnreadable:  # a foreign or damaged $MIA_LENS_STORE, found when opened or (an index) when first read
    store_unreadable()

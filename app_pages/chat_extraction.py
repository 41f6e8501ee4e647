"""Extract books from a chat API (Ahmed et al. 2026): each book continued from its opening, beside a negative control,
every call in the evidence record — what `mia extract-books` does, with the cost before and during the run.

The run works in a background thread and writes to the results store as it goes, so a reload reattaches to it; the
page polls its progress and the cost so far. A visitor's run is bounded: a budget is required, and at most
`MAX_PAGE_TEXTS` texts.
"""
from __future__ import annotations

import streamlit as st

from mia_core.audit.api_estimate import estimate
from mia_core.audit.api_extraction import Text
from mia_core.audit.api_report import api_report_html, api_report_pdf
from mia_core.blackbox.two_phase import PROFILES, ExtractionSettings
from mia_core.csv_safe import to_csv_safe
from mia_core.limits import MAX_PAGE_BUDGET_DOLLARS, MAX_PAGE_BUDGET_TOKENS
from mia_core.model.chat.prices import Budget, parse_budget
from mia_core.runs.store import ResultsStore
from ui.chat_extraction import (
    DIFF_LEGEND, MAX_PAGE_TEXTS, diff_html, numbers_words, progress_words, read_texts, result_table, start_run,
)
from ui.jobs import session_folder
from ui.markdown import md
from ui.models import chosen_chat_model
from ui.uploads import saved_uploads

RUN_KEY = "chat_run_id"
PASTE = "Paste a text"
#: Session key: the run whose finished results the whole page has drawn (the progress fragment reruns it once).
DRAWN_KEY = "chat_run_drawn"
#: Most characters pasted as one book or control (a whole book is uploaded as a file).
MAX_PASTED_CHARS = 2_000_000
UPLOAD_TYPES = ["txt", "md", "pdf", "epub", "zip", "csv", "jsonl"]
#: The results table's headers, in words.
COLUMN_WORDS = {"name": "text", "role": "role", "max_block": "longest block (words)",
                "claim_blocks": "blocks ≥ 100 words", "m": "verbatim words", "missing": "missing words",
                "additional": "additional words", "phase1_s": "probe score s", "halt": "halted by",
                "halt_pattern": "pattern", "phase2_turns": "continue turns", "refusals": "refusals",
                "input_tokens": "input tokens", "output_tokens": "output tokens"}

st.title("Extract books from a chat API")
st.caption("For models you can only chat with (GPT, Claude, Gemini …): does the model, given a book's opening, go on "
           "to recite the book? Near-verbatim recall beside a text it cannot have seen, every call recorded. The "
           "instruction is the paper's, never a jailbreak. Docs: Chat APIs.")
def texts_ui(column, title: str, role: str, upload_label: str, paste_label: str) -> tuple[list | None, str | None]:
    """(uploaded files, pasted text) of one role, as chosen by its radio: one of the two is None."""
    how = column.radio(title, ["Upload files", PASTE], horizontal=True, key=f"chat_{role}_how")
    if how == PASTE:
        return None, column.text_area(paste_label, height=120, key=f"chat_{role}_text", max_chars=MAX_PASTED_CHARS)
    return column.file_uploader(upload_label, type=UPLOAD_TYPES, accept_multiple_files=True, key=f"chat_{role}s"), None


model = chosen_chat_model()
st.markdown(f"Model **{md(model.chat.model)}** at {md(model.chat.base_url)}, answering as "
            f"**{md(str(model.answered_model))}**; tier {model.tier.name}; {md(model.prices.words())}.")

left, right = st.columns(2)
books_files, books_pasted = texts_ui(left, "Books", "book", "Books to extract", "Book text")
control_files, control_pasted = texts_ui(
    right, "Negative control: a text the model cannot have seen (e.g. published after its cutoff)", "control",
    "Control texts", "Control text")
c1, c2, c3, c4, c5 = st.columns(5)
profile = c1.selectbox("Profile", list(PROFILES), key="chat_profile", help="The paper's settings per provider, or ours.")
defaults = PROFILES[profile]
max_tokens = int(c2.number_input("Tokens per turn", 1, 8000, defaults.max_tokens, key=f"chat_tokens_{profile}"))
max_turns = int(c3.number_input("Continue turns per book", 0, 1000, defaults.max_turns, key=f"chat_turns_{profile}"))
probe_tokens = int(c4.number_input("Probe answer tokens", 1, 8000, 1000, key="chat_probe_tokens",
                                   help="The first answer's length (the paper: 1000)."))
budget_text = c5.text_input("Budget (required)", "$1", key="chat_budget",
                            help=f"Dollars (\"$5\") or tokens (\"2M tokens\"); at most ${MAX_PAGE_BUDGET_DOLLARS:g} or "
                                 f"{MAX_PAGE_BUDGET_TOKENS:,} tokens from this page. The run stops before a request "
                                 "that could pass it.")
settings = ExtractionSettings.from_profile(profile, max_tokens=max_tokens, max_turns=max_turns,
                                           phase1_max_tokens=probe_tokens)

folder = session_folder("chat_uploads", "mia-chat-")
books_source = saved_uploads(books_files, folder / "books", "The books")
control_source = saved_uploads(control_files, folder / "control", "The control")
texts, problems = [], []
for source, pasted, role in ((books_source, books_pasted, "book"), (control_source, control_pasted, "control")):
    if source is not None:
        found, bad = read_texts(source, role)
        texts += found
        problems += bad
    elif pasted and pasted.strip():
        texts.append(Text(f"pasted {role}", pasted, role, "pasted"))
for problem in problems:
    st.warning(f"Not read: {md(problem)}")
try:
    budget = parse_budget(budget_text)
    if (budget.dollars or 0) > MAX_PAGE_BUDGET_DOLLARS or (budget.tokens or 0) > MAX_PAGE_BUDGET_TOKENS:
        raise ValueError(f"a run from this page spends at most ${MAX_PAGE_BUDGET_DOLLARS:g} or "
                         f"{MAX_PAGE_BUDGET_TOKENS:,} tokens; the command line has no such bound")
    if budget.dollars is not None and not model.prices.known:
        raise ValueError("a dollar budget needs the API's prices (price_in=/price_out= in the spec); give tokens")
except ValueError as err:
    st.error(f"Budget: {err}")
    budget = None

roles = {t.role for t in texts}
if texts:
    st.info("Estimate: " + estimate([(t.text, t.role) for t in texts], settings, model.prices).words())
ready = budget is not None and roles == {"book", "control"} and len(texts) <= MAX_PAGE_TEXTS
if roles and "control" not in roles:
    st.warning("Add a negative control: without one, what the method finds where there is nothing to find is unknown, "
               "so the run is refused.")
if len(texts) > MAX_PAGE_TEXTS:
    st.error(f"{len(texts)} texts: a run from this page extracts at most {MAX_PAGE_TEXTS} (the CLI has no bound).")
store = ResultsStore()
if st.button("Run extraction", type="primary", disabled=not ready, key="chat_run"):
    st.session_state[RUN_KEY] = start_run(model, store, texts, settings, budget or Budget())

run_id = st.session_state.get(RUN_KEY)
if run_id:
    @st.fragment(run_every=2)
    def progress() -> None:
        words, working = progress_words(store, run_id, model)
        (st.info if working else st.success)(("Running: " if working else "Run finished: ") + words)
        if not working and st.session_state.get(DRAWN_KEY) != run_id:  # the results below were drawn mid-run
            st.session_state[DRAWN_KEY] = run_id
            st.rerun()
        if working:
            st.session_state[DRAWN_KEY] = None

    progress()
    table = result_table(store, run_id)
    st.dataframe(table.drop(columns="unit"), hide_index=True, key="chat_results", column_config={
        "nv_recall": st.column_config.NumberColumn("nv-recall", format="percent"),
        **{name: st.column_config.Column(words) for name, words in COLUMN_WORDS.items()}})
    done = table.dropna(subset=["nv_recall"])
    if not done.empty:
        unit = st.selectbox("Diff view of", list(done["unit"]), key="chat_diff_unit",
                            format_func=lambda u: str(done.set_index("unit").loc[u, "name"]))
        row = done.set_index("unit").loc[unit]
        st.markdown(numbers_words(row))
        st.caption(DIFF_LEGEND)
        st.html(diff_html(store, run_id, unit))
        st.download_button("Diff (HTML)", diff_html(store, run_id, unit, shown_words=None),
                           file_name=f"diff-{unit}.html", mime="text/html", key="chat_diff_download")
    d1, d2, d3 = st.columns(3)
    d1.download_button("Results (CSV)", to_csv_safe(table.drop(columns="unit")), file_name=f"{run_id}.csv",
                       mime="text/csv", key="chat_csv")
    d2.download_button("Report (HTML)", api_report_html(store, run_id), file_name=f"{run_id}-report.html",
                       mime="text/html", key="chat_report")
    if d3.button("Report (PDF)", key="chat_pdf_make"):
        try:
            d3.download_button("Download the PDF", api_report_pdf(store, run_id), file_name=f"{run_id}-report.pdf",
                               mime="application/pdf", key="chat_pdf")
        except RuntimeError as err:  # WeasyPrint or Pango missing
            d3.error(str(err))
    st.caption(f"Evidence record: run `{run_id}`. Check it with `mia verify {run_id}`: it re-walks every stored call "
               "and recomputes these numbers from the stored answers.")

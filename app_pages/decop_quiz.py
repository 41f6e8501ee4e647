"""DE-COP on a chat API (Duarte et al. 2024; METHODS-API.md §19): is a book's original passage picked out of three
paraphrases more often than for clean books the model cannot have seen? — what `mia decop-books` does, with the
cost before and during the run, every call in the evidence record.

The run works in a background thread and writes to the results store as it goes, so a reload reattaches to it; the
page polls its progress and the cost so far. A visitor's run is bounded: a budget is required (at most
`MAX_PAGE_BUDGET_*`), and each table is held to `MAX_QUIZ_BOOKS` books of `MAX_QUIZ_PASSAGES` passages.
"""
from __future__ import annotations

import streamlit as st

from mia_core.audit.api_extraction import RecordMismatch
from mia_core.audit.api_estimate import quiz_estimate
from mia_core.audit.decop_report import (
    SELF_PARAPHRASED, decop_report_html, decop_report_pdf, decop_table, self_paraphrased,
)
from mia_core.blackbox.decop_passages import MAX_QUIZ_BOOKS, MAX_QUIZ_PASSAGES
from mia_core.blackbox.decop_stats import MIN_CLEAN_BOOKS
from mia_core.csv_safe import to_csv_safe
from mia_core.limits import MAX_PAGE_BUDGET_DOLLARS, MAX_PAGE_BUDGET_TOKENS
from mia_core.names import file_name
from mia_core.runs.api_results import stored_results
from mia_core.runs.store import ResultsStore
from ui.decop_quiz import (
    COLUMN_WORDS, LETTERS, LETTERS_HELP, PERCENT_COLUMNS, QuizTable, accuracy_figure, clean_problem, clean_table,
    estimate_words, makers_problem, mu_words, notes_markdown, over_budget, page_budget, progress_words, quiz_settings,
    read_quiz_table, run_summary, shown_books, start_quiz, verdict_markdown,
)
from ui.jobs import session_folder
from ui.markdown import md
from ui.models import chosen_chat_model
from ui.uploads import saved_uploads

RUN_KEY = "decop_run_id"
#: Session key: the run whose finished results the whole page has drawn (the progress fragment reruns it once).
DRAWN_KEY = "decop_run_drawn"
TABLE_TYPES = ["csv", "tsv", "jsonl", "json"]
COLUMNS_HELP = ("Columns: `book`, optional `author`, `passage`, `paraphrase_1`, `paraphrase_2`, `paraphrase_3` "
                "(ours), or BookTection's `ID`, `Example_A`…`Example_D` and `Answer` (the verbatim's letter); "
                f"optionally `paraphrased_by`. At most {MAX_QUIZ_BOOKS} books of {MAX_QUIZ_PASSAGES} passages a table.")

st.title("DE-COP quiz on a chat API")
st.caption("For models you can only chat with: shown four passages — a book's original and three paraphrases — in "
           "all 24 orders, does the model pick the original more often for the audited book than for clean books it "
           "cannot have seen? Evidence about that book's text, not extraction. Docs: Chat APIs.")
model = chosen_chat_model()
st.markdown(f"Model **{md(model.chat.model)}** at {md(model.chat.base_url)}, answering as "
            f"**{md(str(model.answered_model))}**; tier {model.tier.name}; {md(model.prices.words())}.")

left, right = st.columns(2)
books_file = left.file_uploader("Audited books: their quiz table (CSV or JSONL)", type=TABLE_TYPES, key="decop_books",
                                help=COLUMNS_HELP)
clean_file = right.file_uploader(f"Clean books: at least {MIN_CLEAN_BOOKS}, published after the model's training "
                                 "cutoff, paraphrased the same way (CSV or JSONL)", type=TABLE_TYPES,
                                 key="decop_clean", help=COLUMNS_HELP)
c1, c2, c3 = st.columns([2, 2, 1])
provenance = c1.text_input("Who made the paraphrases (--paraphrases-from)", key="decop_provenance",
                           placeholder="e.g. Claude 2.0, the authors' prompt",
                           help="Required unless both tables name it in a `paraphrased_by` column (`mia paraphrase` "
                                "writes it). Stated for every book in the report; the same process for both tables. "
                                "Paraphrases made by the audited model itself are easier for it to reject.").strip()
letters = c2.selectbox("Letters read as", list(LETTERS), format_func=LETTERS.get, key="decop_letters",
                      help=LETTERS_HELP)
budget_text = c3.text_input("Budget (required)", "$1", key="decop_budget",
                            help=f"Dollars (\"$5\") or tokens (\"2M tokens\"); at most ${MAX_PAGE_BUDGET_DOLLARS:g} or "
                                 f"{MAX_PAGE_BUDGET_TOKENS:,} tokens from this page. The run stops before a request "
                                 "that could pass it.")

folder = session_folder("decop_uploads", "mia-decop-")
tables: dict[str, QuizTable | None] = {}
for role, upload, what in (("books", books_file, "The audited books' table"),
                           ("clean", clean_file, "The clean books' table")):
    source = saved_uploads([upload] if upload else None, folder / role, what)
    tables[role] = read_quiz_table(source, provenance) if source is not None else None
problems = []
for role, table in tables.items():
    if table is None:
        continue
    if table.error:
        st.error(f"Not read: {md(table.error)}")
        continue
    if table.notes:
        with st.expander(f"{table.name}: {len(table.notes):,} passage(s) or book(s) set aside by the quality gates"):
            st.markdown(notes_markdown(table.notes))
    if not table.books:
        problems.append(f"{table.name} has no book with a passage through the quality gates")
audited, clean = tables["books"], tables["clean"]
if clean is not None and not clean.error and clean_problem(clean):
    problems.append(clean_problem(clean))
if audited and clean and audited.books and clean.books and makers_problem(audited, clean):
    problems.append(makers_problem(audited, clean))
try:
    settings = quiz_settings(model, letters)
except ValueError as err:
    problems.append(str(err))
    settings = None
try:
    budget = page_budget(budget_text, model.prices)
except ValueError as err:
    problems.append(f"Budget: {err}")
    budget = None
for problem in problems:
    st.error(md(problem))

usable = audited is not None and clean is not None and bool(audited.books) and bool(clean.books)
if usable and settings is not None:
    maker = audited.books[0].provenance
    if self_paraphrased(maker, model.chat.model, model.answered_model):
        st.warning(f"Warning: {SELF_PARAPHRASED} ({md(maker)}).")
    cost = quiz_estimate(list(audited.books + clean.books), settings, model.prices)
    st.info(f"Estimate for **{md(model.chat.model)}**: " + md(estimate_words(cost, audited.books, clean.books)))
    if budget is not None and over_budget(cost, budget):
        st.warning("The estimate is over the budget: the run will stop before every book is quizzed, and books "
                   "not finished are left out of the comparison. Press Run again with a larger budget to go on.")
ready = usable and not problems
store = ResultsStore()
if st.button("Run the quiz", type="primary", disabled=not ready, key="decop_run"):
    try:
        st.session_state[RUN_KEY] = start_quiz(model, store, audited.books, clean.books, settings, budget)
    except (ValueError, RecordMismatch) as err:  # too few clean books for the runner; a record not this run's
        st.error(md(str(err)))

run_id = st.session_state.get(RUN_KEY)
if run_id:
    @st.fragment(run_every=2)
    def progress() -> bool:
        words, working = progress_words(store, run_id)
        (st.info if working else st.success)(("Running: " if working else "Run finished: ") + md(words))
        if not working and st.session_state.get(DRAWN_KEY) != run_id:  # the results below were drawn mid-run
            st.session_state[DRAWN_KEY] = run_id
            st.rerun()
        if working:
            st.session_state[DRAWN_KEY] = None
        return working

    if not progress():
        manifest = store.run(run_id)["config"]
        summary = run_summary(str(store.path), run_id, len(stored_results(store, run_id)))
        st.subheader(f"Results — model {md(manifest['model'])}")
        st.markdown(f"Model **{md(manifest['model'])}**, answering as **{md(str(manifest.get('answered_model')))}** "
                    f"(tier {md(manifest['tier'])}), run `{run_id}`. A book's **accuracy** is the share of its "
                    "questions where this model picked the original out of four options (chance: 25%). An accuracy "
                    "significantly above the clean books' is evidence that the model was exposed to *that book's "
                    "text* — not extraction, and not evidence about the rest of its training data.")
        for words in verdict_markdown(summary):
            st.markdown(f"- {words}")
        st.plotly_chart(accuracy_figure(summary, str(manifest["model"])), key="decop_figure")
        table = decop_table(summary)
        formats = {"z": "%+.2f", "percentile": "%.0f", "bootstrap_p": "%.4f", **dict.fromkeys(PERCENT_COLUMNS, "%.1f")}
        st.dataframe(shown_books(table), hide_index=True, key="decop_results", column_config={
            c: st.column_config.NumberColumn(words, help=why, format=formats[c]) if c in formats
            else st.column_config.Column(words, help=why) for c, (words, why) in COLUMN_WORDS.items()})
        left, right = st.columns([2, 3])
        left.markdown(f"**Clean books that calibrated it** ({len(summary.clean)}; mean "
                      + (f"{summary.clean_mean:.1%} ± {summary.clean_sd or 0:.1%})" if summary.clean else "none)"))
        left.dataframe(clean_table(summary), hide_index=True, key="decop_clean_table", column_config={
            "accuracy %": st.column_config.NumberColumn("accuracy %", format="%.1f")})
        right.markdown(f"**Calibration μ** (each letter's mean probability over every question of the run; the "
                       f"position bias taken out before a question's answer is read): {mu_words(summary)}")
        stem = ("decop", run_id, manifest["model"])
        d1, d2, d3 = st.columns(3)
        d1.download_button("Results (CSV)", to_csv_safe(table), file_name=file_name(*stem, suffix=".csv"),
                           mime="text/csv", key="decop_csv")
        d2.download_button("Report (HTML)", decop_report_html(store, run_id),
                           file_name=file_name(*stem, "report", suffix=".html"), mime="text/html", key="decop_report")
        if d3.button("Report (PDF)", key="decop_pdf_make"):
            try:
                d3.download_button("Download the PDF", decop_report_pdf(store, run_id),
                                   file_name=file_name(*stem, "report", suffix=".pdf"), mime="application/pdf",
                                   key="decop_pdf")
            except RuntimeError as err:  # WeasyPrint or Pango missing
                d3.error(str(err))
        st.caption(f"Evidence record: run `{run_id}`. Check it with `mia verify {run_id}`: it re-walks every stored "
                   "call and recomputes these numbers from the stored answers.")

"""A finished book audit on the page: calibration, books (verdict first, coloured by verdict), the demo's ground truth,
one book's snippets and the downloads."""
from __future__ import annotations

from dataclasses import asdict, replace
from functools import partial

import numpy as np
import pandas as pd
import streamlit as st

import mia_core
from mia_core.audit.books import VERDICT_MEANING, VERDICT_SHORT, equal_rate_notes, verdict_keys
from mia_core.audit.calibration import weak_calibration_reason
from mia_core.audit.figures import books_figure, calibration_figure, snippet_scores_figure
from mia_core.audit.jobs import AuditResult, AuditSettings, audit_result
from mia_core.audit.plain_words import book_paragraph
from mia_core.audit.provenance import book_digests, run_facts
from mia_core.audit.pdf import UNAVAILABLE as PDF_UNAVAILABLE
from mia_core.audit.report import BOOK_CSV_COLUMNS, SNIPPET_CSV_COLUMNS, report_html, report_pdf
from mia_core.audit.report_snippets import snippet_heatmap
from mia_core.csv_safe import to_csv_safe
from mia_core.demo.ground_truth import adapter_training_plays, demo_book_truth
from mia_core.names import file_name
from ui.audit_extraction import extraction_results_ui
from ui.audit_progress import results_store
from ui.dataset_inference import dataset_inference_ui
from ui.jobs import public_message
from ui.markdown import md
from ui.models import cached_model, short_model

TRUTH_WORDS = {1: "in training", 0: "held out"}
PERCENT = ("rate", "rate_lo", "rate_hi", "prevalence", "prevalence_lo", "prevalence_hi")

def run_model(spec: str):
    """The model a run was scored with, or None if it cannot be loaded here (then no heatmaps)."""
    try:
        return cached_model(spec)
    except mia_core.ModelLoadError as err:
        st.info(f"Model {md(spec)} of this run cannot be loaded here ({md(err)}); snippets are shown without heatmaps.")
        return None


@st.cache_data(show_spinner=False, max_entries=16)
def cached_result(run_id: str, settings: dict, n_scored: int) -> AuditResult:
    """The analysis of a finished run (recomputed only when its settings or scores change)."""
    return audit_result(results_store(), run_id, AuditSettings(**settings))


@st.cache_data(show_spinner=False)
def demo_plays() -> dict[str, tuple[int, str]]:
    """The demo plays and whether the demo-known adapter was trained on each (read once per server)."""
    return adapter_training_plays()


@st.cache_data(show_spinner=False, max_entries=16)
def run_truth(run_id: str, _result: AuditResult) -> dict[str, int] | None:
    """Book → 1/0 known membership when the run audits the demo plays themselves; None for anything else."""
    audit = _result.snippets[_result.snippets["role"] == "audit"]

    def read_texts(names: list[str]) -> dict[str, list[str]]:
        rows = audit[audit["book"].isin(names)]
        texts = _result.texts(rows["snippet_id"]).to_numpy()
        return {b: list(texts[(rows["book"] == b).to_numpy()]) for b in names}

    try:
        return demo_book_truth(audit["book"].unique().tolist(), read_texts, demo_plays())
    except (OSError, ValueError):  # the demo's source packages are missing here: no ground truth to show
        return None


def books_table(books: pd.DataFrame, keys: list[str], truth: dict[str, int] | None) -> pd.DataFrame:
    """The per-book table as shown: the verdict in a few words first, then the book, the ground truth if asked, the
    test's p-values (what the verdict rests on: in view at 1400 px, never scrolled to), then the other numbers."""
    shown = books.drop(columns=["verdict", "verdict_fpr"]).assign(verdict=[VERDICT_SHORT[k] for k in keys])
    extra = []
    if truth is not None:
        shown["ground_truth"] = shown["book"].map(lambda b: TRUTH_WORDS[truth[b]])
        extra = ["ground_truth"]
    return shown[["verdict", "book", *extra, "p_adj", "p_value", "prevalence", "prevalence_lo", "prevalence_hi", "rate",
                  "rate_lo", "rate_hi", "n_snippets", "n_effective", "mean_score"]]


def table_config(legend: str) -> dict:
    """Short labels and widths; verdict and book pinned so the verdict is never scrolled away."""
    number = st.column_config.NumberColumn
    return {
        "verdict": st.column_config.TextColumn("verdict", width="medium", pinned=True, help=legend),
        "book": st.column_config.TextColumn("book", width="medium", pinned=True),
        "ground_truth": st.column_config.TextColumn("ground truth",
                                                    help="whether the demo-known adapter was trained on this play"),
        "prevalence": number("prevalence", format="percent", width="small", help="estimated share of the book seen"),
        "prevalence_lo": number("prev. low", format="percent", help="prevalence interval, low end"),
        "prevalence_hi": number("prev. high", format="percent", help="prevalence interval, high end"),
        "rate": number("rate", format="percent", width="small", help="share of snippets at or above the threshold"),
        "rate_lo": number("rate low", format="percent", help="rate interval, low end"),
        "rate_hi": number("rate high", format="percent", help="rate interval, high end"),
        "n_snippets": number("snippets", width="small"),
        "n_effective": number("effective", format="%.1f", width="small",
                              help="snippets ÷ serial design effect along the book"),
        "mean_score": number("mean score", format="%.4g", width="small"),
        "p_value": number("p", format="%.2g", width="small", help="one-sided Mann–Whitney U against non-member snippets"),
        "p_adj": number("p (BH)", format="%.2g", width="small", help="Benjamini–Hochberg across this run's books"),
    }


def calibration_ui(cal) -> None:
    """The threshold's quality on the calibration books: metrics, warnings and the ROC."""
    c = st.columns(4)
    c[0].metric("Calibration AUROC", f"{cal.auroc:.3f}", help=f"{cal.ci:.0%} interval {cal.auroc_ci[0]:.3f}–"
                f"{cal.auroc_ci[1]:.3f}, whole books resampled")
    c[1].metric("TPR at threshold", f"{cal.tpr:.1%}", help=f"{cal.ci:.0%} Clopper–Pearson (exact) interval "
                f"{cal.tpr_ci[0]:.1%}–{cal.tpr_ci[1]:.1%} on {cal.n_member_snippets / cal.tpr_deff:.0f} effective snippets "
                "(snippets ÷ design effect of hits within a book)")
    c[2].metric("FPR at threshold", f"{cal.fpr:.1%}", help=f"{cal.ci:.0%} Clopper–Pearson (exact) interval "
                f"{cal.fpr_ci[0]:.1%}–{cal.fpr_ci[1]:.1%} on {cal.n_nonmember_snippets / cal.fpr_deff:.0f} effective "
                "snippets (snippets ÷ design effect of hits within a book)")
    c[3].metric("Threshold", f"{cal.threshold:.4g}" if np.isfinite(cal.threshold) else "∞ (flags nothing)",
                help="A snippet is flagged when its score is at or above the threshold.")
    for warning in cal.warnings:
        st.warning(warning)
    st.plotly_chart(calibration_figure(cal), key="audit_roc")


def truth_ui(run: dict, truth: dict[str, int] | None) -> dict[str, int] | None:
    """For a run of the demo plays, a toggle showing which plays the demo-known adapter was trained on."""
    if truth is None or not st.toggle("Show the ground truth", key="audit_truth",
                                      help="Only for the demo plays: the split the demo-known adapter was trained on."):
        return None
    members = ", ".join(md(b) for b, v in sorted(truth.items()) if v == 1) or "none of these plays"
    st.info(f"Ground truth of the demo: the demo-known adapter was trained on {members}; the other plays were held out. "
            "An audit under `demo` (the base model: the split is random, so its calibration cannot tell member plays from "
            "held-out ones) should find none of them; under "
            f"`demo-known` it should find the members. This run's model: {md(run['model'])}.")
    return truth


def books_ui(result: AuditResult, run: dict) -> None:
    """Chart and table of the books in one order, coloured and labelled by verdict, with notes on equal rates."""
    cal = result.calibration
    keys = verdict_keys(result.books, cal)
    st.markdown(f"**Books, highest estimated prevalence first** — {md(mia_core.METHODS[run['method']].label)} under "
                f"{md(run['model'])}; a clean book shows about the calibration FPR; verdicts say *consistent with* "
                "training, never more.")
    if cal.informative and (reason := weak_calibration_reason(cal)):
        st.warning(f"**The calibration is too weak for a verdict, so none is given**: {md(reason)}.")
    truth = truth_ui(run, run_truth(run["run_id"], result))
    legend = " · ".join(f"**{VERDICT_SHORT[k]}**: {VERDICT_MEANING[k]}" for k in dict.fromkeys(keys))
    st.caption(f"Verdicts at a threshold that flags {cal.fpr:.1%} of the calibration's non-member snippets — {legend}. "
               "Rate: Clopper–Pearson interval on the book's effective snippets (correlation along the book removed). "
               "Prevalence: the values an exact binomial test of the book's hits does not reject, over draws of a new "
               "book's TPR/FPR (calibration books resampled, one book offset shared by both).")
    for note in equal_rate_notes(result.books, keys, quote=md):
        st.info(note)
    st.plotly_chart(books_figure(result.books, cal, keys, truth), key="audit_books_chart")
    st.dataframe(books_table(result.books, keys, truth), hide_index=True, key="audit_books_table",
                 column_config=table_config(legend.replace("**", "")))


def results_ui(run_id: str, analysis: AuditSettings) -> None:
    """Calibration, per-book chart and table, drill-down with heatmaps, dataset inference, downloads."""
    run = results_store().run(run_id)
    stored = AuditSettings(**run["config"])
    settings = AuditSettings(**{**asdict(stored), "rule": analysis.rule, "target_fpr": analysis.target_fpr,
                                "seed": analysis.seed})
    result = cached_result(run_id, asdict(settings), results_store().progress(run_id)[0])
    st.subheader(f"Run {run_id}: {mia_core.METHODS[run['method']].label} on {md(run['model'])} ({run['backend']} backend)")
    params = ", ".join(f"{name}={value}" for name, value in run["params"].items()) or "the method's defaults"
    st.caption(f"{stored.snippet_words}-word snippets · parameters {md(params)} · code {md(run['code_version'])} · "
               "change the threshold rule above to re-analyse without re-scoring")
    calibration_ui(result.calibration)
    books_ui(result, run)
    if not result.problems.empty:
        st.markdown("**Books not audited**")
        st.dataframe(result.problems.map(lambda v: public_message(v) if isinstance(v, str) else v), hide_index=True,
                     key="audit_problems")
    result = replace(result, extraction=extraction_results_ui(run_id, settings.ci))  # in the report and provenance too
    lm = run_model(run["model"])
    provenance_ui(result, lm)
    drill_down(result, run, lm)
    dataset_inference_ui(results_store(), run_id, run, lm)
    d1, dp, d2, d3 = st.columns(4)
    name = partial(file_name, "audit", run_id, short_model(run["model"]))  # named by run and model
    d1.download_button("Report (HTML)", lambda: report_html(result, lm), name("report", suffix=".html"), "text/html",
                       key="audit_dl_html")  # built on click, not on every rerun
    if PDF_UNAVAILABLE:
        dp.caption(f"No PDF report here: {PDF_UNAVAILABLE}")
    else:
        dp.download_button("Report (PDF)", lambda: report_pdf(result, lm), name("report", suffix=".pdf"),
                           "application/pdf",
                           key="audit_dl_pdf")  # A4, page numbers; rendered on click
    d2.download_button("Books (CSV)", to_csv_safe(result.books[BOOK_CSV_COLUMNS]), name("books", suffix=".csv"),
                       "text/csv",
                       key="audit_dl_books")
    d3.download_button("Snippets (CSV)", lambda: "".join(to_csv_safe(c[SNIPPET_CSV_COLUMNS], header=i == 0)
                                                         for i, c in enumerate(result.snippet_chunks())),
                       name("snippets", suffix=".csv"), "text/csv", key="audit_dl_snippets")  # texts read on click only


def provenance_ui(result: AuditResult, lm) -> None:
    """Model, code, seeds, the command that repeats the run, and each book's SHA-256 as audited (read on request:
    hashing reads every snippet's text)."""
    with st.expander("Provenance: model, code, seeds, the command that repeats this run, each book's SHA-256"):
        facts = run_facts(result, lm)
        command = facts.pop("repeat with")
        st.dataframe(pd.DataFrame({"": list(facts), "value": list(facts.values())}), hide_index=True,
                     key="audit_provenance_facts")
        st.code(command, language="bash", wrap_lines=True)
        st.caption("With this run's job id the store refuses other texts, model or scoring settings: the command "
                   "repeats this run or fails. Hashes: each book's snippets' texts, in order, each followed by a "
                   "newline (UTF-8), the text the scores describe.")
        if st.toggle("Compute each book's SHA-256 (reads every snippet's text)", key="audit_provenance_hashes"):
            st.dataframe(book_digests(result), hide_index=True, key="audit_provenance_books")


def book_summary(row: pd.Series) -> str:
    """One book's verdict and numbers in words (its name escaped for Markdown)."""
    text = (f"**{md(row.name)}**: {md(row['verdict'])}. Rate {row['rate']:.0%} "
            f"({row['rate_lo']:.0%}–{row['rate_hi']:.0%}) of {row['n_snippets']} snippets "
            f"({row['n_effective']:.1f} effective)")
    if pd.notna(row["prevalence"]):
        text += (f"; estimated prevalence {row['prevalence']:.0%} ({row['prevalence_lo']:.0%}–"
                 f"{row['prevalence_hi']:.0%})")
    return text + f"; adjusted p {row['p_adj']:.2g}."


def drill_down(result: AuditResult, run: dict, lm) -> None:
    """One book's snippet scores along the book, and its top snippets as token heatmaps (collapsed until opened)."""
    keys = dict(zip(result.books["book"], verdict_keys(result.books, result.calibration)))
    book = st.selectbox("Look inside a book", list(keys), key="audit_book")
    st.caption(book_summary(result.books.set_index("book").loc[book]))
    row = next(result.books[result.books["book"] == book].itertuples())
    st.markdown(md(book_paragraph(row, keys[book], result.calibration, snippet_words=result.settings.snippet_words,
                                  method=mia_core.METHODS[run["method"]].label, model=run["model"])))
    st.plotly_chart(snippet_scores_figure(result.snippets[result.snippets["role"] == "audit"], book, result.calibration),
                    key="audit_book_scores")
    n_top = st.slider("Top snippets shown", 1, 10, 2, key="audit_top")
    rows = result.snippets[(result.snippets["role"] == "audit") & (result.snippets["book"] == book)].nlargest(n_top, "score")
    texts = result.texts(rows["snippet_id"])  # only the snippets shown are read with their texts
    for snippet in rows.itertuples():
        title = f"Snippet {snippet.position} — score {snippet.score:.4g}" + (" (flagged)" if snippet.flagged else "")
        with st.expander(title, expanded=False):
            heatmap = None if lm is None else snippet_heatmap(lm, texts[snippet.snippet_id], result.settings,
                                                              f"audit-heatmap-{snippet.position}")
            if heatmap is not None:
                st.html(heatmap)
                continue
            if lm is not None:
                st.caption(f"{mia_core.METHODS[run['method']].label} has no per-token view from the model's statistics "
                           "alone; the snippet is shown as text.")
            st.text(texts[snippet.snippet_id])

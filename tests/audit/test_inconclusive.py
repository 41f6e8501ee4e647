"""Three verdicts kept apart: a book most of whose snippets are flagged but whose test does not reach significance
with these counts is *inconclusive* (never "no evidence found"), a clean held-out book is "no evidence found", and
the inconclusive verdict says about how many snippets would decide, checked against scipy's Mann–Whitney test."""
from __future__ import annotations

import html
import math
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
from scipy import stats

from mia_core.audit.books import ALPHA, VERDICTS, analyse_books, snippets_needed, verdict_keys
from mia_core.audit.figures import VERDICT_COLOURS, books_figure
from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit
from mia_core.audit.pdf import UNAVAILABLE
from mia_core.audit.report import write_report
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.audit.plain_words import book_paragraph
from mia_core.palette import NEUTRAL, NONMEMBER
from mia_core.runs.store import ResultsStore

from tests.audit.test_statistics import two_by_two
from tests.support.books import words

#: The PDF is checked where WeasyPrint's Pango and poppler's pdftotext are installed (make pdf-deps).
PDF_UNAVAILABLE = bool(UNAVAILABLE) or not shutil.which("pdftotext")

#: The demo's Book audit under demo-known: 4 of edward-iii's 5 snippets over the threshold (flagging 0% of the 10
#: non-member calibration snippets), among 8 audited plays of 5 snippets.
EDWARD = [5.2, 5.4, 5.1, 5.3, 0.5]


def demo_like_run() -> tuple[pd.DataFrame, list[str], object]:
    """edward-iii and seven clean held-out books (scores among the non-member calibration's), analysed."""
    cal = two_by_two(5)
    books = {"edward-iii": EDWARD} | {f"clean-{i}": list(np.random.default_rng(i).uniform(0, 1, 5)) for i in range(7)}
    snippets = pd.DataFrame([(b, i, s) for b, scores in books.items() for i, s in enumerate(scores)],
                            columns=["book", "position", "score"])
    table = analyse_books(cal, snippets)
    return table, verdict_keys(table, cal), cal


def test_flagged_but_not_significant_is_inconclusive_and_a_clean_book_no_evidence():
    table, keys, cal = demo_like_run()
    rows = {row.book: (row, key) for row, key in zip(table.itertuples(), keys)}
    edward, key = rows["edward-iii"]
    assert edward.rate == 0.8 and cal.fpr == 0.0 and edward.prevalence_lo > 0  # well above the calibration
    assert edward.p_adj >= ALPHA  # yet the BH-adjusted book test does not reach significance
    assert key == "inconclusive" and edward.verdict.startswith(VERDICTS["inconclusive"])
    assert "no evidence" not in edward.verdict
    assert "about 6 snippets of this book (it has 5" in edward.verdict
    assert "about 12 known non-member calibration snippets (there are 10)" in edward.verdict
    clean = [(row, k) for b, (row, k) in rows.items() if b.startswith("clean")]
    assert all(k == "none" and row.rate == 0 for row, k in clean)
    assert all(row.verdict.startswith(VERDICTS["none"]) for row, _ in clean)
    # the bar's colour follows the verdict: grey for inconclusive, blue for no evidence
    bars = {t.name: t for t in books_figure(table, cal, keys).data if t.type == "bar"}
    assert bars["inconclusive"].marker.color == VERDICT_COLOURS["inconclusive"] == NEUTRAL
    assert list(bars["inconclusive"].y) == ["edward-iii"]
    assert bars["no evidence found"].marker.color == NONMEMBER
    words = book_paragraph(edward, key, cal, snippet_words=512, method="Min-K%++", model="demo-known")
    assert "inconclusive, not a sign that the book is clean" in words and "no evidence of training" not in words


def test_the_snippets_needed_let_scipys_test_decide_at_the_same_separation():
    """Tiling the book's own scores to the count asked for (the AUROC against the reference unchanged) brings
    scipy's one-sided Mann–Whitney p below α / books; the counts it has now do not."""
    table, _, cal = demo_like_run()
    reference = np.r_[np.arange(10) / 10]  # two_by_two's non-member calibration scores
    edward = table.set_index("book").loc["edward-iii"]
    n_books, goal = len(table), ALPHA / len(table)
    book_n, reference_n = snippets_needed(edward.p_value, 5, 10, n_books)

    def p(book: np.ndarray, ref: np.ndarray) -> float:
        return stats.mannwhitneyu(book, ref, alternative="greater", method="asymptotic").pvalue
    tiled = np.resize(np.array(EDWARD), book_n)  # the book's scores repeated to the asked count
    assert p(tiled, reference) < goal <= p(tiled[:-1], reference)  # the count asked for, and not one fewer
    more_reference = np.resize(reference, reference_n)  # the reference's scores repeated likewise
    assert p(np.array(EDWARD), more_reference) < goal * 1.25 and p(np.array(EDWARD), more_reference[:-2]) >= goal


def test_no_count_helps_when_the_scores_sit_below_the_reference():
    assert snippets_needed(0.7, 5, 10, 8) == (None, None)
    # a weak separation needs more than either count alone can give: the other count is the limit
    assert snippets_needed(0.4, 5, 10, 8) == (None, None)
    book, reference = snippets_needed(0.02, 5, 10, 8)
    assert 5 < book < math.inf and 10 < reference < math.inf


def hand_scored_audit(path: Path):
    """A finished audit scored by hand: Fewbook's first 4 of 5 snippets score like members (≈ 1), its last and 7 clean
    books' like the non-members (≈ 0), noise of sd 0.1; 2 + 2 calibration books of 5 snippets."""
    store = ResultsStore(path)
    cal_books = [Book(f"cal{i}", words(50, f"c{i}"), "test", int(i < 2)) for i in range(4)]
    audit = [Book(name, words(50, f"{name[:3]}{i}"), "test") for i, name in enumerate(["Fewbook", *CLEAN])]
    settings = AuditSettings(method="loss", params={}, snippet_words=10, n_boot=50)
    run_id = plan_audit(store, ModelRef("hand"), audit, cal_books, settings, lm=SimpleNamespace(fingerprint="hand"))
    planned = store.pending(run_id)
    position = planned.groupby("book").cumcount()
    truth = planned["label"].astype(float).fillna(((planned["book"] == "Fewbook") & (position < 4)).astype(float))
    noise = np.random.default_rng(3).normal(0, 0.1, len(planned))
    store.write_scores(run_id, planned[["snippet_id"]].assign(score=truth.to_numpy() + noise, n_tokens=10,
                                                             truncated=False),
                       fingerprint="hand", method="loss", params={}, code_version="t", session="t")
    return audit_result(store, run_id)


CLEAN = [f"Clean{i}" for i in range(7)]


def test_books_csv_the_report_and_the_pdf_say_inconclusive(tmp_path):
    result = hand_scored_audit(tmp_path / "r.duckdb")
    paths = write_report(result, tmp_path / "out", pdf=not PDF_UNAVAILABLE)
    books = pd.read_csv(paths["books"]).set_index("book")
    few = books.loc["Fewbook"]
    assert few["rate"] >= 0.6 and few["prevalence_lo"] > 0 and few["p_adj"] >= ALPHA
    assert few["verdict"].startswith(VERDICTS["inconclusive"]) and "would let the test decide" in few["verdict"]
    assert all(books.loc[b, "verdict"].startswith(VERDICTS["none"]) for b in CLEAN)
    page = paths["report"].read_text()
    assert "<b>1 book is inconclusive</b>" in page
    assert f"<td class='verdict' style='border-left-color:{NEUTRAL}'>inconclusive</td>" in page
    assert f"<b>Fewbook</b>: {html.escape(few['verdict'])}." in page  # the plain words, as books.csv has it
    if "pdf" in paths:
        flat = " ".join(subprocess.run(["pdftotext", "-enc", "UTF-8", str(paths["pdf"]), "-"], check=True,
                                       capture_output=True, text=True).stdout.split())
        assert f"Fewbook: {few['verdict']}." in flat and "1 book is inconclusive" in flat

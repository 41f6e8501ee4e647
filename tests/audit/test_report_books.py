"""How the per-book results read: the note on equal rates with different verdicts, and the report's book table.

Rates, p-values and BH adjustments are recomputed here from the snippet scores (counts over the threshold,
scipy's Mann–Whitney U, BH by hand); the report's table is parsed back with the standard library's HTML parser.
"""
from __future__ import annotations

from html.parser import HTMLParser
from types import SimpleNamespace

import numpy as np
import pandas as pd
from scipy import stats as sps

from mia_core.audit.books import analyse_books, equal_rate_notes, verdict_keys
from mia_core.audit.calibration import calibrate
from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit
from mia_core.audit.report import report_html
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.palette import MEMBER, NONMEMBER
from mia_core.runs.store import ResultsStore

from tests.support.books import words

EVIL = '<img src=x onerror="alert(1)">&amp;'


def calibration(rng) -> object:
    """Three member books scoring ≈ 1 and three non-member books ≈ 0, ten snippets each."""
    labels = np.repeat([1, 1, 1, 0, 0, 0], 10)
    return calibrate(labels + rng.normal(0, 0.1, 60), labels, np.repeat(list("abcdef"), 10), n_boot=200, seed=0)


def test_equal_rates_with_different_verdicts_are_explained():
    rng = np.random.default_rng(0)
    cal = calibration(rng)
    scores = {"long": np.tile([1.0, 0.0], 10) + rng.normal(0, 0.05, 20),  # 10 of 20 over the threshold
              "short": np.array([1.0, 0.0]) + rng.normal(0, 0.05, 2),  # 1 of 2
              "twin": np.tile([1.0, 1.0, 0.0, 0.0], 5) + rng.normal(0, 0.05, 20)}  # 10 of 20
    snippets = pd.DataFrame([{"book": b, "position": i, "score": s} for b, v in scores.items() for i, s in enumerate(v)])
    books = analyse_books(cal, snippets)
    rates = {b: float(np.mean(v >= cal.threshold)) for b, v in scores.items()}
    assert rates == {"long": 0.5, "short": 0.5, "twin": 0.5}
    p = {b: sps.mannwhitneyu(v, cal.nonmember_scores, alternative="greater").pvalue for b, v in scores.items()}
    ranked = sorted(p, key=p.get)  # BH: p_(i) · m / i, made monotone from the largest down
    adj = {b: min(min(p[c] * 3 / (ranked.index(c) + 1) for c in ranked[ranked.index(b):]), 1.0) for b in ranked}
    assert adj["long"] < 0.05 < adj["short"]  # the short book cannot reach significance with two snippets

    keys = verdict_keys(books, cal)
    by_book = dict(zip(books["book"], keys))
    assert by_book["long"] == by_book["twin"] == "evidence" and by_book["short"] == "none"
    notes = equal_rate_notes(books, keys, quote=lambda b: f"«{b}»")
    assert len(notes) == 1
    note = notes[0]
    assert "at 50% of snippets flagged" in note and "«long»" in note and "«short»" in note
    assert f"adjusted p {adj['long']:.2g}, 20.0 effective of 20 snippets) and 1 more like it" in note
    assert f"adjusted p {adj['short']:.2g}, 2.0 effective of 2 snippets" in note
    same = books[books["book"] != "short"]
    assert equal_rate_notes(same, verdict_keys(same, cal)) == []  # equal rates, one verdict: nothing to explain


class Tables(HTMLParser):
    """Cells of the table with class 'books': header texts, and per row (cell text, cell style)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside, self.cell, self.headers, self.rows = False, None, [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("class") == "books":
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = [tag, "", attrs.get("style", "")]

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[1] += data

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.cell is not None and tag in ("td", "th"):
            kind, text, style = self.cell
            (self.headers.append(text) if kind == "th" else self.rows[-1].append((text, style)))
            self.cell = None


def test_report_book_table_puts_the_verdict_first_and_escapes_names(tmp_path):
    store = ResultsStore(tmp_path / "r.duckdb")
    cal_books = [Book(f"cal{i}", words(100, f"c{i}"), "test", int(i < 2)) for i in range(4)]
    audit = [Book(EVIL, words(100, "e"), "test"), Book("plain", words(100, "p"), "test")]
    settings = AuditSettings(method="loss", params={}, snippet_words=10, n_boot=50)
    run_id = plan_audit(store, ModelRef("hand"), audit, cal_books, settings, lm=SimpleNamespace(fingerprint="hand"))
    planned = store.pending(run_id)
    member = planned["label"].astype(float).fillna(planned["book"].map({EVIL: 1.0, "plain": 0.0})).to_numpy()
    scores = planned[["snippet_id"]].assign(score=member + np.random.default_rng(2).normal(0, 0.1, len(planned)),
                                            n_tokens=10, truncated=False)
    store.write_scores(run_id, scores, fingerprint="hand", method="loss", params={}, code_version="t", session="t")
    page = report_html(audit_result(store, run_id))

    assert EVIL not in page and "onerror=\"alert" not in page
    table = Tables()
    table.feed(page)
    assert table.headers[:2] == ["verdict", "book"]
    rows = {cells[1][0]: cells for cells in table.rows if cells}
    assert set(rows) == {EVIL, "plain"}  # the name comes back as itself once the entities are decoded
    assert rows[EVIL][0] == ("consistent with training", f"border-left-color:{MEMBER}")  # 10 of 10 snippets ≈ 1
    assert rows["plain"][0] == ("no evidence found", f"border-left-color:{NONMEMBER}")
    assert rows[EVIL][3][0].startswith("100.0% [")  # rate 10/10, its interval in the same cell
    assert rows["plain"][4][0].startswith("10 (")  # ten snippets, the effective count beside them

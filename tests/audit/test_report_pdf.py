"""The report's print-ready PDF: it opens, is A4, numbers its pages, states each book's verdict as books.csv has it,
draws its figures as vectors, shows hidden characters of a book name as escapes, and is written all-or-none.

The PDF is read back with tools outside the project: pypdf (pages, page size) and poppler's pdftotext / pdfimages.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from pypdf import PdfReader

from mia_core.audit import report
from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit
from mia_core.audit.pdf import UNAVAILABLE
from mia_core.audit.report import write_report
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

from tests.support.books import words

pytestmark = pytest.mark.skipif(bool(UNAVAILABLE) or not shutil.which("pdftotext"),
                                reason="needs Pango and poppler-utils (make pdf-deps)")

#: A name that a right-to-left override would show as "exe.txt…" if it were obeyed, and one of HTML markup.
BIDI = "\u202eevil.exe"
MARKUP = '<img src=x onerror="alert(1)">'
#: What a reader must see for each book's name (hand-written, not from the code under test).
SHOWN = {BIDI: "\\u202eevil.exe", MARKUP: MARKUP, "Plainbook": "Plainbook"}
A4 = (595.28, 841.89)  # points
ARTIFACTS = Path(__file__).resolve().parents[2] / "tests" / "artifacts"


def hand_scored_result(path: Path):
    """A finished audit scored by hand: the two hostile-named books score like members (≈ 1), Plainbook like the
    non-members (≈ 0), each snippet with noise of sd 0.1."""
    store = ResultsStore(path)
    cal_books = [Book(f"cal{i}", words(150, f"c{i}"), "test", int(i < 3)) for i in range(6)]
    audit = [Book(name, words(150, name[:3]), "test") for name in SHOWN]
    settings = AuditSettings(method="loss", params={}, snippet_words=10, n_boot=50)
    run_id = plan_audit(store, ModelRef("hand"), audit, cal_books, settings, lm=SimpleNamespace(fingerprint="hand"))
    planned = store.pending(run_id)
    member = planned["label"].astype(float).fillna(planned["book"].map({BIDI: 1.0, MARKUP: 1.0, "Plainbook": 0.0}))
    scores = planned[["snippet_id"]].assign(score=member.to_numpy() + np.random.default_rng(3).normal(0, 0.1, len(planned)),
                                            n_tokens=10, truncated=False)
    store.write_scores(run_id, scores, fingerprint="hand", method="loss", params={}, code_version="t", session="t")
    return audit_result(store, run_id)


def pdf_text(path: Path) -> str:
    return subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], check=True, capture_output=True,
                          text=True).stdout


def test_pdf_report_opens_numbers_its_pages_and_states_each_verdict(tmp_path):
    result = hand_scored_result(tmp_path / "r.duckdb")
    paths = write_report(result, tmp_path / "out", pdf=True)
    assert paths["pdf"] == paths["report"].with_name("report.pdf") and paths["pdf"].read_bytes().startswith(b"%PDF-")

    pages = PdfReader(paths["pdf"]).pages
    assert len(pages) >= 2  # text, tables, two figures and the snippets do not fit one page
    for page in pages:
        assert [float(v) for v in page.mediabox[2:]] == pytest.approx(A4, abs=0.5)
    text = pdf_text(paths["pdf"])
    flat = " ".join(text.split())  # lines joined as a reader reads them
    for i in range(1, len(pages) + 1):
        assert f"page {i} of {len(pages)}" in flat
    books = pd.read_csv(paths["books"])
    assert len(books) == 3
    verdicts = dict(zip(books["book"].map(lambda b: next(s for n, s in SHOWN.items() if b == n)), books["verdict"]))
    assert verdicts["\\u202eevil.exe"].startswith("evidence consistent with training on this book (threshold at")
    assert verdicts["Plainbook"].startswith("no evidence of training found")
    for shown, verdict in verdicts.items():
        assert f"{shown}: {verdict}." in flat  # the book, then its verdict word for word, in the plain-words section
    assert "\u202e" not in text and "Book audit report" in text and "Limits of the evidence" in text

    images = subprocess.run(["pdfimages", "-list", str(paths["pdf"])], check=True, capture_output=True, text=True)
    assert images.stdout.splitlines()[2:] == []  # the figures are vector drawings, not bitmaps
    ARTIFACTS.mkdir(exist_ok=True)  # pages as images, to look at as a reader would
    for first in (1, 3):
        subprocess.run(["pdftoppm", "-r", "60", "-png", "-singlefile", "-f", str(first), "-l", str(first),
                        str(paths["pdf"]), str(ARTIFACTS / f"audit_report_pdf_p{first}")], check=True)
    printed = report.report_html(result, printed=True)
    svgs = re.findall(r"data:image/svg\+xml;base64,", printed)
    assert len(svgs) == 2 and "<script" not in printed  # both figures, drawn for paper


def test_pdf_is_written_with_the_other_outputs_or_not_at_all(tmp_path, monkeypatch):
    result = hand_scored_result(tmp_path / "r.duckdb")
    out = tmp_path / "out"
    paths = write_report(result, out, pdf=True)
    before = {name: path.read_bytes() for name, path in paths.items()}

    def broken(page: str) -> bytes:
        raise RuntimeError("renderer failed")

    monkeypatch.setattr(report, "html_to_pdf", broken)
    with pytest.raises(RuntimeError, match="renderer failed"):
        write_report(replace(result, books=result.books.assign(verdict="changed")), out, pdf=True)
    assert {name: path.read_bytes() for name, path in paths.items()} == before
    assert sorted(p.name for p in out.iterdir()) == ["books.csv", "report.html", "report.pdf", "snippets.csv"]

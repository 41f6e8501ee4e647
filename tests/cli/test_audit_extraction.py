"""`mia audit-books --extraction`: every book's extraction figures equal the extraction API's on the book's text,
apart from membership in the report, in extraction.csv, and in the command that repeats the run."""
from __future__ import annotations

import html
import re

import pandas as pd
import pytest

from mia_core import load_model
from mia_core.audit.extraction import book_row, extraction_evidence
from mia_core.audit.jobs import audit_result
from mia_core.audit.report import report_html
from mia_core.runs.store import ResultsStore
from mia_core.audit.sources import read_audit_inputs
from mia_core.extract import ExtractionSettings, extract_texts

from tests.audit.test_jobs import write_library
from tests.support.cli_runner import run_cli


def test_extraction_figures_per_book_match_the_api(tmp_path, model_dir):
    cal, books = write_library(tmp_path)
    out = tmp_path / "a"
    code, stdout, err = run_cli(
        "audit-books", "--model", model_dir, "--calibration", cal, "--books", books, "--output-dir", out,
        "--snippet-words", "20", "--max-snippets-per-book", "3", "--n-boot", "100", "--store", tmp_path / "r.duckdb",
        "--extraction", "--prefix", "8", "--suffix", "6", "--stride", "5", "--top-k", "5")
    assert code == 0, err
    table = pd.read_csv(out / "extraction.csv")
    inputs = read_audit_inputs(str(books), str(cal))
    audited, calibration = list(inputs.books), list(inputs.calibration)
    assert table["role"].tolist() == ["audited"] * len(audited) + [
        "calibration member" if b.label == 1 else "calibration non-member" for b in calibration]
    lm = load_model(str(model_dir), device="cpu")
    settings = ExtractionSettings(prefix=8, suffix=6, stride=5, top_k=5)
    every = audited + calibration
    results = extract_texts(lm, [b.text for b in every], settings, cache=False)
    for book, result, row in zip(every, results, table.to_dict("records")):
        want = book_row(book.name, result)
        assert row["book"] == book.name and row["extraction_windows"] == want["extraction_windows"] > 0
        assert row["share_pz_ge_0.001"] == pytest.approx(want["share_pz_ge_0.001"])
        assert row["share_pz_ge_0.5_ci_high"] == pytest.approx(want["share_pz_ge_0.5_ci"][1])
        assert row["max_log10_pz"] == pytest.approx(want["max_log10_pz"], abs=1e-9)
    report = (out / "report.html").read_text()
    assert "<h2>Verbatim extraction</h2>" in report and "not a statistical inference" in report
    assert report.index("<h2>Verbatim extraction</h2>") > report.index("<h2>Books</h2>")
    command = html.unescape(re.search(r"<td>repeat with</td><td>(.*?)</td>", report).group(1))
    assert "--extraction --prefix 8 --suffix 6 --stride 5 --top-k 5 --temperature 1" in command
    assert stdout.count(" extraction: ") == len(every)
    store = ResultsStore(tmp_path / "r.duckdb")
    result = audit_result(store, store.runs(kind="book-audit")["run_id"][0])
    result.extraction = extraction_evidence(lm, [(b.name, "audited", b.text) for b in every], settings)
    printed = report_html(result, lm, printed=True)  # the PDF's HTML: the table and findings, no script
    assert "<h2>Verbatim extraction</h2>" in printed and "<script" not in printed


def test_extraction_settings_are_checked_before_scoring(tmp_path, model_dir):
    cal, books = write_library(tmp_path)
    code, _, err = run_cli("audit-books", "--model", model_dir, "--calibration", cal, "--books", books,
                           "--output-dir", tmp_path / "a", "--store", tmp_path / "r.duckdb", "--extraction",
                           "--stride", "0")
    assert code == 2 and "stride must be a whole number" in err and "snippets" not in err

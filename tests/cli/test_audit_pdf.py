"""`mia audit-books --pdf`: report.pdf beside report.html, stating each book's verdict; without Pango, one error line
before anything is scored."""
from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest
from pypdf import PdfReader

from mia_core.audit.pdf import UNAVAILABLE
from mia_core.cli import audit as audit_cli

from tests.audit.test_jobs import write_library
from tests.support.cli_runner import run_cli


def audit_args(tmp_path, model_dir) -> list:
    cal, books = write_library(tmp_path)
    return ["audit-books", "--model", model_dir, "--calibration", cal, "--books", books, "--snippet-words", "20",
            "--max-snippets-per-book", "3", "--n-boot", "100", "--store", tmp_path / "r.duckdb",
            "--output-dir", tmp_path / "out", "--pdf"]


@pytest.mark.skipif(bool(UNAVAILABLE) or not shutil.which("pdftotext"), reason="needs Pango and poppler-utils")
def test_pdf_flag_writes_report_pdf_beside_the_html(tmp_path, model_dir):
    code, _, err = run_cli(*audit_args(tmp_path, model_dir))
    assert code == 0, err
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["books.csv", "report.html", "report.pdf", "snippets.csv"]
    assert str(out / "report.pdf") in err  # named in the "wrote …" line
    pages = len(PdfReader(out / "report.pdf").pages)
    text = " ".join(subprocess.run(["pdftotext", str(out / "report.pdf"), "-"], check=True, capture_output=True,
                                   text=True).stdout.split())
    books = pd.read_csv(out / "books.csv")
    assert sorted(books["book"]) == ["b0", "b1", "b2", "b3"]
    for row in books.itertuples():
        assert f"{row.book}: {row.verdict}." in text
    assert f"page {pages} of {pages}" in text


def test_pdf_without_pango_is_one_error_before_scoring(tmp_path, model_dir, monkeypatch):
    monkeypatch.setattr(audit_cli, "PDF_UNAVAILABLE", "PDF reports need the Pango library (test)")
    code, out, err = run_cli(*audit_args(tmp_path, model_dir))
    assert code == 2 and err.strip() == "error: --pdf: PDF reports need the Pango library (test)"
    assert "Traceback" not in out + err and not (tmp_path / "out").exists()
    assert not (tmp_path / "r.duckdb").exists()  # said before the store is opened and anything scored

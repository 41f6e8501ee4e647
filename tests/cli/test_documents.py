"""`mia score` reads .pdf and .epub documents as the dashboard does: one document, one text; a bad one, one error line."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from mia_core import load_model, score_texts

from tests.inputs.test_hostile_files import small_epub, text_pdf
from tests.support.cli_runner import run_cli

PDF_TEXT = "the river castle was founded north of the harbour"
EPUB_TEXT = "a comet over the quiet meadow and the silver orchard"


def test_score_reads_a_pdf_an_epub_and_a_folder_of_them(model_dir, tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.pdf").write_bytes(text_pdf(PDF_TEXT))
    (docs / "b.epub").write_bytes(small_epub(EPUB_TEXT))
    (docs / "c.md").write_text("# Notes\nthe bishop wrote")
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "oracle-cache"))  # the command computes its own statistics
    expected = score_texts(load_model(str(model_dir)), [PDF_TEXT, EPUB_TEXT, "# Notes\nthe bishop wrote"],
                           ["loss", "zlib"])
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    for source, rows in ((docs / "a.pdf", [0]), (docs / "b.epub", [1]), (docs, [0, 1, 2])):
        out = tmp_path / "s.csv"
        code, _, err = run_cli("score", "--model", model_dir, "--input", source, "--output", out, "--methods", "loss,zlib")
        assert code == 0, err
        got = pd.read_csv(out)
        assert got["id"].tolist() == [["a.pdf", "b.epub", "c.md"][r] for r in rows]
        np.testing.assert_allclose(got[["loss", "zlib"]].to_numpy(), expected[["loss", "zlib"]].to_numpy()[rows],
                                   rtol=1e-6)
        assert re.search(r"^scoring: [\d,]+/[\d,]+ tokens \(100%\), 0:\d\d elapsed$", err, re.M), err  # not a tty: lines


@pytest.mark.parametrize("name, data, needle", [("bad.pdf", b"%PDF-1.4 garbage", "not a readable PDF"),
                                                ("bad.epub", b"PK not really", "not a readable EPUB"),
                                                ("empty.pdf", b"", "empty")])
def test_a_bad_document_is_one_error_line_and_exit_2(name, data, needle, tmp_path):
    (tmp_path / name).write_bytes(data)
    code, out, err = run_cli("score", "--model", "demo", "--input", tmp_path / name, "--output", tmp_path / "o.csv")
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: ") and needle in err and name in err, err
    assert "Traceback" not in out + err

"""`mia extract`: the windows CSV and the per-text summary agree with the Python API, and bad input is one line."""
from __future__ import annotations

import csv

import pandas as pd
import pytest

from mia_core import load_model
from mia_core.extract import ExtractionSettings, extract_texts

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts


@pytest.fixture
def book(tmp_path):
    """Two texts in a CSV: one long enough for several windows, one shorter than a window."""
    path = tmp_path / "texts.csv"
    pd.DataFrame({"id": ["long", "short"], "text": [" ".join(random_texts(6, seed=5)), "too short"]}).to_csv(path,
                                                                                                         index=False)
    return path


def test_windows_and_summary_match_the_api(model_dir, book, tmp_path):
    out, summary = tmp_path / "w.csv", tmp_path / "s.csv"
    code, stdout, _ = run_cli("extract", "--model", model_dir, "--input", book, "--output", out, "--summary", summary,
                              "--prefix", 8, "--suffix", 6, "--stride", 4, "--top-k", 5, "--device", "cpu")
    assert code == 0, stdout
    windows = pd.read_csv(out)
    settings = ExtractionSettings(prefix=8, suffix=6, stride=4, top_k=5)
    texts = pd.read_csv(book)["text"].tolist()
    want = extract_texts(load_model(str(model_dir), device="cpu"), texts, settings, cache=False)
    assert windows[windows["id"] == "long"]["log10_pz"].tolist() == pytest.approx(
        want[0].windows["log10_pz"].tolist(), abs=1e-9)
    assert (windows["id"] == "short").sum() == 0 and want[1].n_windows == 0
    rows = list(csv.DictReader(open(summary, newline="")))
    assert [r["id"] for r in rows] == ["long", "short"]
    assert int(rows[0]["windows"]) == want[0].n_windows
    assert float(rows[0]["share_pz_ge_0.001"]) == pytest.approx(want[0].share_at(1e-3))
    assert "short: shorter than one window (14 tokens)" in stdout
    assert f"long: {want[0].n_windows:,} windows" in stdout


@pytest.mark.parametrize("args, needle", [
    (["--stride", "0"], "stride must be a whole number"),
    (["--temperature", "0"], "temperature must be a number above 0"),
    (["--bos", "first"], "BOS policy"),
])
def test_bad_settings_are_one_line(model_dir, book, tmp_path, args, needle):
    code, stdout, stderr = run_cli("extract", "--model", model_dir, "--input", book, "--output", tmp_path / "w.csv",
                                   *args)
    assert code == 2 and needle in stderr and stderr.count("\n") == 1 and "Traceback" not in stderr + stdout
    assert not (tmp_path / "w.csv").exists()


def test_missing_output_folder_is_refused_before_loading(model_dir, book, tmp_path):
    code, _, stderr = run_cli("extract", "--model", model_dir, "--input", book, "--output", tmp_path / "no" / "w.csv")
    assert code == 2 and "output folder does not exist" in stderr and "loading model" not in stderr

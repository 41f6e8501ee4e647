"""CSV formula injection: every CSV written from user text neutralises cells that a spreadsheet would run.

A book named `=HYPERLINK("http://x")` and a text starting `@SUM(A1)` go through each writer (books.csv, snippets.csv,
`mia audit-online`, `mia audit-unlearning`, `mia score`, `mia eval --scores-output`); the CSV is read back: those
cells start with `'`, and the numeric columns are the same numbers as a direct computation (negative ones included).
"""
from __future__ import annotations

import ast
import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mia_core import load_model, score_texts
from mia_core.audit.jobs import AuditSettings, run_audit
from mia_core.audit.online import OnlineParams, detect_online
from mia_core.audit.report import write_csvs
from mia_core.audit.sources import Book
from mia_core.csv_safe import safe_frame, to_csv_safe
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, save_tiny_model

ROOT = Path(__file__).resolve().parents[1]
EVIL_NAME = '=HYPERLINK("http://x")'
EVIL_TEXT = "@SUM(A1)"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))


def rows(path: Path) -> list[dict[str, str]]:
    """The CSV as raw strings (no type guessing), so a neutralised cell is seen exactly as a spreadsheet would."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def texts_input(tmp_path: Path, labels: bool = False) -> tuple[Path, list[str]]:
    """A jsonl input whose first row is the hostile one: id `=HYPERLINK(…)`, text starting `@SUM(A1)`."""
    texts = [f"{EVIL_TEXT} " + t for t in random_texts(6, seed=3, min_words=30, max_words=40)]
    ids = [EVIL_NAME, "-minus", "+plus", "plain", "\tTab", "@at"]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "text": t, "label": n % 2}) for n, (i, t) in enumerate(zip(ids, texts))))
    return path, texts


def test_safe_frame_neutralises_only_string_cells_that_start_a_formula():
    frame = pd.DataFrame({"name": ["=1+1", "+1", "-1", "@A1", "\t=1", "\r=1", "ok", "", None, "a=b"],
                          "score": [-1.2, 3.0, -0.5, 0.0, 1e-9, -7.0, 2.5, 1.0, 4.0, -3.3],
                          "n": np.arange(10)})
    safe = safe_frame(frame)
    assert safe["name"].tolist()[:7] == ["'=1+1", "'+1", "'-1", "'@A1", "'\t=1", "'\r=1", "ok"]
    assert safe["name"].tolist()[7] == "" and safe["name"].isna().tolist()[8] and safe["name"].tolist()[9] == "a=b"
    assert safe["score"].tolist() == [-1.2, 3.0, -0.5, 0.0, 1e-9, -7.0, 2.5, 1.0, 4.0, -3.3]  # numbers stay numbers
    assert safe["score"].dtype == np.float64 and safe["n"].dtype == frame["n"].dtype
    assert frame["name"].tolist()[0] == "=1+1"  # the caller's frame is not changed
    written = to_csv_safe(pd.DataFrame({"=evil": ["x"], "v": [-1.5]}))
    assert written.splitlines() == ["'=evil,v", "x,-1.5"]  # a hostile column name too


LIVE_STARTS = ("=", "+", "-", "@")


def live_cells(text: str) -> list[str]:
    """Cells a spreadsheet would run: those starting a formula, in the CSV parsed as a spreadsheet does (a bare `\r` or
    `\n` outside quotes ends a row); numbers such as `-1.5` are numbers, not formulas."""
    return [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row
            if cell.startswith(LIVE_STARTS) and not is_number(cell)]


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def test_line_breaks_inside_cells_are_quoted_so_no_row_starts_a_formula():
    """A bare carriage return inside a cell (`x\r=1+1`) used to be written unquoted: readers split the row there and
    the next one began with a live `=1+1`."""
    cells = ["\r=1+1", "x\r=1+1", "y\n@SUM(A1)", "z\r\n+1", "plain"]
    written = to_csv_safe(pd.DataFrame({"text": cells, "score": [-1.0, -2.0, -3.0, -4.0, -5.0]}))
    assert live_cells(written) == []
    back = list(csv.reader(io.StringIO(written, newline="")))
    assert back[1:] == [["'\r=1+1", "-1.0"], ["x\r=1+1", "-2.0"], ["y\n@SUM(A1)", "-3.0"], ["z\r\n+1", "-4.0"],
                        ["plain", "-5.0"]]
    got = pd.read_csv(io.StringIO(written, newline=""))
    assert got["text"].tolist() == ["'\r=1+1", *cells[1:]] and got["score"].tolist() == [-1.0, -2.0, -3.0, -4.0, -5.0]


def test_cli_score_quotes_carriage_returns(tmp_path, model_dir):
    texts = [f"word{i}\r=1+1 " + t for i, t in enumerate(random_texts(3, seed=4, min_words=20, max_words=30))]
    src = tmp_path / "cr.jsonl"
    src.write_text("\n".join(json.dumps({"id": f"a\r@{i}", "text": t}) for i, t in enumerate(texts)))
    code, _, err = run_cli("score", "--model", model_dir, "--input", src, "--output", tmp_path / "s.csv",
                           "--methods", "loss")
    assert code == 0, err
    written = (tmp_path / "s.csv").open(encoding="utf-8", newline="").read()
    assert live_cells(written) == []
    assert [r["id"] for r in rows(tmp_path / "s.csv")] == [f"a\r@{i}" for i in range(3)]
    expected = score_texts(load_model(str(model_dir)), texts, ["loss"])["loss"].to_numpy()
    np.testing.assert_allclose(pd.read_csv(tmp_path / "s.csv")["loss"].to_numpy(), expected, rtol=1e-6)


def test_audit_books_and_snippets_csv(tmp_path, model_dir):
    lm = load_model(str(model_dir))
    texts = random_texts(16, seed=5, min_words=20, max_words=30)
    calibration = [Book(f"cal{i}", "\n".join(texts[4 * i:4 * i + 4]), "test", i % 2) for i in range(2)]
    books = [Book(EVIL_NAME, f"{EVIL_TEXT} " + "\n".join(texts[8:12]), "test"),
             Book("-2 plain", "\n".join(texts[12:]), "test")]
    settings = AuditSettings(method="loss", params={}, snippet_words=20, n_boot=50, batch_snippets=8)
    result = run_audit(ModelRef("tiny"), books, calibration, settings, ResultsStore(tmp_path / "r.duckdb"), lm=lm)
    books_path, snippets_path = write_csvs(result, tmp_path / "out")
    names = [r["book"] for r in rows(books_path)]
    assert f"'{EVIL_NAME}" in names and "'-2 plain" in names and EVIL_NAME not in names
    snippets = rows(snippets_path)
    first = next(r for r in snippets if r["book"] == f"'{EVIL_NAME}" and r["position"] == "0")
    assert first["text"].startswith(f"'{EVIL_TEXT}")
    got = pd.read_csv(snippets_path)
    assert got["score"].dtype == np.float64 and (got["score"] < 0).all()  # loss scores: negative numbers, kept
    by_id = result.snippets.set_index("snippet_id")["score"]
    hostile = got["book"].str.startswith("'")
    assert got.loc[hostile, "snippet_id"].str.startswith("'").all()  # ids are "<book>#<n>": neutralised with the book
    ids = got["snippet_id"].where(~hostile, got["snippet_id"].str[1:])
    np.testing.assert_allclose(got["score"].to_numpy(), by_id.loc[ids].to_numpy(), rtol=0, atol=0)


def test_cli_score_and_eval_scores(tmp_path, model_dir):
    src, texts = texts_input(tmp_path)
    code, _, err = run_cli("score", "--model", model_dir, "--input", src, "--output", tmp_path / "s.csv",
                           "--methods", "loss")
    assert code == 0, err
    assert [r["id"] for r in rows(tmp_path / "s.csv")] == [f"'{EVIL_NAME}", "'-minus", "'+plus", "plain", "'\tTab", "'@at"]
    expected = score_texts(load_model(str(model_dir)), texts, ["loss"])["loss"].to_numpy()
    got = pd.read_csv(tmp_path / "s.csv")["loss"]
    assert got.dtype == np.float64 and (got < 0).all()
    np.testing.assert_allclose(got.to_numpy(), expected, rtol=1e-6)

    code, _, err = run_cli("eval", "--model", model_dir, "--input", src, "--methods", "loss", "--n-boot", "100",
                           "--output", tmp_path / "m.json", "--scores-output", tmp_path / "scores.csv")
    assert code == 0, err
    assert rows(tmp_path / "scores.csv")[0]["id"] == f"'{EVIL_NAME}"
    np.testing.assert_allclose(pd.read_csv(tmp_path / "scores.csv")["loss"].to_numpy(), expected, rtol=1e-6)


def test_cli_online_windows(tmp_path, model_dir):
    src, texts = texts_input(tmp_path)
    code, _, err = run_cli("audit-online", "--model", model_dir, "--input", src, "--output", tmp_path / "w.csv",
                           "--method", "loss", "--window", "8")
    assert code == 0, err
    windows = rows(tmp_path / "w.csv")
    assert windows[0]["id"] == f"'{EVIL_NAME}" and windows[0]["text"].startswith(f"'{EVIL_TEXT}")
    assert not any(r["id"] == EVIL_NAME for r in windows)
    _, direct = detect_online(load_model(str(model_dir)), texts[0], OnlineParams(window=8, method="loss"))
    got = pd.read_csv(tmp_path / "w.csv")
    first = got[got["id"] == f"'{EVIL_NAME}"]
    assert got["score"].dtype == np.float64 and (first["score"] < 0).all()
    np.testing.assert_allclose(first["score"].to_numpy(), direct["score"].to_numpy(), rtol=1e-6)


def test_cli_unlearning_chunks(tmp_path, model_dir):
    src, _ = texts_input(tmp_path)
    code, _, err = run_cli("audit-unlearning", "--original", model_dir, "--unlearned", model_dir, "--input", src,
                           "--output", tmp_path / "u.csv", "--chunk-words", "10", "--method", "min_k")
    assert code == 0, err
    chunks = rows(tmp_path / "u.csv")
    evil = [r for r in chunks if r["source"] == f"'{EVIL_NAME}"]
    assert evil and all(r["chunk_id"].startswith(f"'{EVIL_NAME}#") for r in evil)
    assert any(r["text"].startswith(f"'{EVIL_TEXT}") for r in evil)
    got = pd.read_csv(tmp_path / "u.csv")
    assert got["score_original"].dtype == np.float64 and (got["score_original"] < 0).all()
    np.testing.assert_allclose(got["score_original"], got["score_unlearned"], rtol=1e-6)  # the same model twice


def test_no_page_or_command_writes_a_csv_around_the_guard():
    """Every `.to_csv(` in the pages, the ui helpers, the CLI and the audit goes through `csv_safe`."""
    offenders = []
    for folder in ("app_pages", "ui", "mia_core/cli", "mia_core/audit"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "to_csv":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders

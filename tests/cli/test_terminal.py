"""Terminal escapes in user data are shown, never obeyed: book names, ids and reasons printed by the CLI.

A book named `\\x1b[2J…` cleared the screen of whoever ran `mia audit-books`, and one holding a newline printed a fake
line of its own ("all books clean"). Now every control character of user data reaches the terminal as its escape.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from mia_core.cli.terminal import one_line, shown
from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts

CLEAR = "\x1b[2J\x1b[H"
TITLE = "\x1b]0;owned\x07"
LINK = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
FAKE_LINE = "x\nALL BOOKS CLEAN\r"
RTL = "abc\u202edcba"
#: Characters a terminal obeys (ESC, BEL, CSI as one C1 character, and the bidi override).
OBEYED = ("\x1b", "\x07", "\x9b", "\u202e")


def test_shown_escapes_controls_and_keeps_our_line_breaks():
    assert shown(CLEAR + "book") == "\\x1b[2J\\x1b[Hbook"
    assert shown(TITLE) == "\\x1b]0;owned\\x07"
    assert shown("a\tb\nc") == "a\tb\nc"  # our own messages keep their layout
    assert shown("C1\x9b31m") == "C1\\x9b31m" and shown(RTL) == "abc\\u202edcba"
    assert shown("naïve 書 — ok") == "naïve 書 — ok"  # printable text is untouched
    assert one_line(FAKE_LINE) == "x\\nALL BOOKS CLEAN\\r" and one_line("a\tb\u2028c") == "a\\tb\\u2028c"


def test_audit_books_prints_hostile_book_names_escaped(tmp_path, model_dir):
    texts = random_texts(48, seed=7, min_words=20, max_words=20)
    cal = pd.DataFrame({"book": [f"c{i // 6}" for i in range(24)], "text": texts[:24],
                        "label": [1 if i < 12 else 0 for i in range(24)]})
    hostile = [CLEAR + "book", TITLE + "t", LINK, FAKE_LINE, RTL, "\x9b31mred"]
    books = pd.DataFrame({"book": [hostile[i // 4] for i in range(24)], "text": texts[24:]})
    cal.to_csv(tmp_path / "cal.csv", index=False)
    books.to_json(tmp_path / "books.jsonl", orient="records", lines=True)
    code, out, err = run_cli("audit-books", "--model", model_dir, "--calibration", tmp_path / "cal.csv",
                             "--books", tmp_path / "books.jsonl", "--snippet-words", "20", "--n-boot", "100",
                             "--method", "loss", "--output-dir", tmp_path / "out", "--store", tmp_path / "r.duckdb")
    assert code == 0, err
    for char in OBEYED:
        assert char not in out and char not in err, repr(char)
    assert "CLEAN\r" not in out + err  # (the library's own loading bar may use \r on stderr)
    assert not any(line.startswith("ALL BOOKS CLEAN") for line in out.splitlines())
    assert "\\x1b[2J\\x1b[Hbook" in out and "x\\nALL BOOKS CLEAN\\r" in out  # shown, so the reader sees the trick
    report = pd.read_csv(tmp_path / "out" / "books.csv")
    assert "x\\nALL BOOKS CLEAN\\r" in report["book"].tolist()  # names keep their controls as escapes everywhere


def test_errors_and_warnings_are_one_escaped_line(tmp_path, model_dir):
    path = tmp_path / ("in" + CLEAR + "\nerror: fake.jsonl")
    code, out, err = run_cli("score", "--model", model_dir, "--input", path, "--output", tmp_path / "s.csv")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and "\x1b" not in err
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps({"id": f"{TITLE}{i}", "text": t})
                              for i, t in enumerate(random_texts(2, seed=1, min_words=20, max_words=20))))
    code, out, err = run_cli("score", "--model", model_dir, "--input", rows, "--output", tmp_path / "s.csv")
    assert code == 0, err
    assert "\x1b" not in out + err and "\x07" not in out + err


def test_every_command_prints_through_echo():
    """No CLI module calls `typer.echo`, `click.echo` or `print` itself: `terminal.echo` is the one way out."""
    root = Path(__file__).resolve().parents[2] / "mia_core" / "cli"
    offenders = [f"{path.name}:{n}" for path in sorted(root.glob("*.py")) if path.name != "terminal.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if re.search(r"\b(typer|click)\.echo\(|(?<![\w.])print\(", line)]
    assert not offenders, offenders

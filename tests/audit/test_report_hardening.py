"""Problem messages as stored and reported: no raw control characters, no dashboard upload folder (issue 45, 7–8)."""
from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.report import _problems_section
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

from tests.support.books import words

W = 8
HOSTILE = "\x1b[31mred\x1b[0m \x1b]0;title\x07 \u202eevil.txt"
UPLOAD = f"{tempfile.gettempdir()}/mia-audit-ab12cd/books/table_with_empty_book.csv"


def stored_problems(tmp_path: Path) -> pd.DataFrame:
    """The problems stored with a run planned with a hostile message and one naming a file in an upload folder."""
    store = ResultsStore(tmp_path / "r.duckdb")
    calibration = [Book(f"cal-{t}", words(4 * W, t), "test", label) for t, label in (("m", 1), ("n", 0))]
    problems = [(HOSTILE, "audit", f"{HOSTILE}: the file is empty"),
                ("(no name)", "audit", f"{UPLOAD}: 2 row(s) with an empty 'book' cell; name every book")]
    run_id = plan_audit(store, ModelRef("tiny"), [Book("a", words(2 * W, "a"), "test")], calibration,
                        AuditSettings(snippet_words=W), problems, lm=SimpleNamespace(fingerprint="fp"))
    return store.problems(run_id)


def test_stored_problem_messages_have_no_raw_control_or_bidi_characters(tmp_path):
    problems = stored_problems(tmp_path)
    text = "".join(problems["book"]) + "".join(problems["message"])
    assert not any(c in text for c in "\x1b\x07\u202e")
    assert "\\x1b]0;title\\x07 \\u202eevil.txt" in problems["message"].iloc[0]


def test_stored_problem_messages_name_uploads_relative_to_the_upload_folder(tmp_path):
    message = stored_problems(tmp_path)["message"].iloc[1]
    assert message.startswith("books/table_with_empty_book.csv: 2 row(s)") and "mia-audit-" not in message


def test_the_reports_problems_table_escapes_a_stored_raw_message():
    """A store written before messages were escaped: the report's "Books not audited" carried the raw characters."""
    section = _problems_section(SimpleNamespace(problems=pd.DataFrame(
        {"book": [HOSTILE], "role": ["audit"], "message": [f"{HOSTILE}: empty"]})))
    assert not any(c in section for c in "\x1b\x07\u202e") and "\\u202eevil.txt" in section

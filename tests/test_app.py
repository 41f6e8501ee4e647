"""The dashboard entry page renders offline and lists every registered method."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from mia_core import METHODS

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def test_home_page_renders_and_lists_methods():
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert at.title[0].value == "MIA Lens"
    shown = at.table[0].value
    assert sorted(shown["method"]) == sorted(METHODS)
    assert any("never proof" in m.value for m in at.markdown)
    assert sorted(at.table[1].value["name"]) == ["demo-books", "demo-wiki"]

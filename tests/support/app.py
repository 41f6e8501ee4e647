"""The dashboard under Streamlit's AppTest: the app's path and a helper that opens a page (tests/app/)."""
from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180).run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at

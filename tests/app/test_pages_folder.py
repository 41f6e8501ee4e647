"""Why the dashboard's pages live in `app_pages/`, not `pages/`: a real Chromium opens a deep link (`/explore`) as the
server's very first request, on two copies of a tiny app whose `app.py` draws a frame and declares its pages with
`st.navigation`. With the pages in `pages/`, Streamlit's legacy discovery serves the page without `app.py`'s frame (no
model picker, no URL state); in `app_pages/` the frame runs. If a Streamlit upgrade makes the first case run the frame
too, this test fails, and the folder may be renamed to `pages/` (docs/development.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_browser import CHROMIUM
from tests.support.dashboard import running_dashboard

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]

FRAME, PAGE = "FRAME-DRAWN-BY-APP-PY", "THE-EXPLORE-PAGE"


def _tiny_app(root: Path, folder: str) -> Path:
    """A two-page app with its pages in `folder`; `app.py` writes FRAME in the sidebar before running the page."""
    (root / folder).mkdir(parents=True)
    (root / folder / "home.py").write_text('import streamlit as st\nst.write("home")\n')
    (root / folder / "explore.py").write_text(f'import streamlit as st\nst.write("{PAGE}")\n')
    app = root / "app.py"
    app.write_text(
        "import streamlit as st\n"
        f'st.sidebar.write("{FRAME}")\n'
        f'st.navigation([st.Page("{folder}/home.py", title="Home", default=True),\n'
        f'               st.Page("{folder}/explore.py", title="Explore a text")]).run()\n')
    return app


def _first_deep_link_text(app: Path, log: Path) -> str:
    """The visible text of `/explore` opened as the server's first request."""
    from playwright.sync_api import sync_playwright

    with running_dashboard({}, log, script=app) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.goto(f"{url}/explore", timeout=60_000)
            page.get_by_text(PAGE).wait_for(timeout=60_000)
            page.wait_for_timeout(1_000)  # the frame is drawn in the same run as the page, before it
            return page.inner_text("body")
        finally:
            browser.close()


@pytest.mark.parametrize("folder, frame_runs", [("pages", False), ("app_pages", True)])
def test_first_deep_link_runs_app_py_only_outside_pages_folder(tmp_path, folder, frame_runs):
    app = _tiny_app(tmp_path / folder, folder)
    text = _first_deep_link_text(app, tmp_path / f"{folder}.log")
    assert PAGE in text
    assert (FRAME in text) is frame_runs, text[:400]

"""Headless Chromium: a chat API chosen in the sidebar (a loopback API whose quiz-taker knows one book), the page
DE-COP quiz on a chat API with the audited and clean books' tables uploaded: the estimate before Run, then the run and
its results — the verdict for the known book, the table, the clean books. Screenshots: tests/artifacts/
decop_estimate.png, decop_results.png."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_browser import ARTIFACTS, CHROMIUM
from tests.app.test_decop_quiz import CLEAN, KNOWN, MEMBER, csv_bytes, quiz_taker
from tests.support.fake_chat import FakeChat
from tests.support.page_actions import click_when_settled, upload, wait_for_rerun

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]


def test_decop_quiz_in_chromium(server, tmp_path):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    (tmp_path / "audited.csv").write_bytes(csv_bytes([MEMBER]))
    (tmp_path / "clean.csv").write_bytes(csv_bytes(CLEAN))
    with FakeChat("unused words") as api, sync_playwright() as p:
        api.first_token = quiz_taker({q.verbatim for q in MEMBER.passages})
        api.delay = 0.02
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"{server}/decop_quiz", timeout=120_000)
        page.get_by_text("A chat API: generated text only", exact=False).click()
        spec = page.get_by_label("API URL and settings")
        spec.fill(api.spec(price_in=2, price_out=8))
        spec.press("Enter")
        page.get_by_text("answering as", exact=False).wait_for(timeout=120_000)
        upload(page, 0, tmp_path / "audited.csv")
        upload(page, 1, tmp_path / "clean.csv")
        provenance = page.get_by_role("textbox", name="Who made the paraphrases")
        provenance.fill("test paraphrases <i>made by hand</i>")
        provenance.press("Enter")
        wait_for_rerun(page)
        estimate = page.get_by_text("264 requests, about", exact=False)
        estimate.wait_for(timeout=60_000)
        assert "$" in estimate.inner_text()
        page.screenshot(path=str(ARTIFACTS / "decop_estimate.png"), full_page=True)
        click_when_settled(page, page.get_by_role("button", name="Run the quiz"))
        page.get_by_text("Run finished: 11 of 11 books quizzed", exact=False).wait_for(timeout=180_000)
        verdict = page.get_by_text("significantly above the clean books: evidence of exposure", exact=False)
        verdict.wait_for(timeout=60_000)
        assert KNOWN in verdict.inner_text()  # the title's markup shown as text, not rendered
        page.set_viewport_size({"width": 1400, "height": 2000})
        page.get_by_text("Results — model").scroll_into_view_if_needed()
        page.wait_for_timeout(1500)  # the figure and the tables drawn
        page.screenshot(path=str(ARTIFACTS / "decop_results.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "decop_results.png").stat().st_size > 20_000

"""Headless Chromium: a chat API chosen in the sidebar (a loopback API that recites one book, a little slowly), the
page Extract books from a chat API with a pasted book and control: the estimate before Run, the run in progress with
its cost so far, then the results and the diff view. Screenshots: tests/artifacts/chat_estimate.png,
chat_progress.png, chat_diff.png."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.app.test_browser import ARTIFACTS, CHROMIUM
from tests.support.fake_chat import FakeChat
from tests.support.page_actions import click_when_settled, set_number, wait_for_rerun

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]

WORDS = "alpha beta gamma delta river stone light house green small dark quiet open old new far".split()


def prose(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "." for _ in range(n_words // 10))


BOOK = "The <Hidden> Chapter. " + prose(500, 5) + " THE END"
CONTROL = prose(500, 6)


def test_chat_extraction_in_chromium(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with FakeChat(BOOK) as api, sync_playwright() as p:
        api.delay = 0.4
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"{server}/chat_extraction", timeout=120_000)
        page.get_by_text("A chat API: generated text only", exact=False).click()
        spec = page.get_by_label("API URL and settings")
        spec.fill(api.spec(price_in=2, price_out=8))
        spec.press("Enter")
        page.get_by_text("answering as", exact=False).wait_for(timeout=120_000)
        for group in ("Books", "Negative control"):
            page.get_by_role("radiogroup", name=group, exact=False).get_by_text("Paste a text").click()
            wait_for_rerun(page)
        for label, text in (("Book text", BOOK), ("Control text", CONTROL)):
            box = page.get_by_label(label)
            box.fill(text)
            box.press("Control+Enter")
            wait_for_rerun(page)
        set_number(page, "Tokens per turn", 60)
        set_number(page, "Probe answer tokens", 60)
        estimate = page.get_by_text("Estimate: at most", exact=False)
        estimate.wait_for(timeout=60_000)
        assert "$" in estimate.inner_text()
        page.screenshot(path=str(ARTIFACTS / "chat_estimate.png"), full_page=True)
        click_when_settled(page, page.get_by_role("button", name="Run extraction"))
        running = page.get_by_text("Running: ", exact=False)
        running.wait_for(timeout=60_000)
        page.wait_for_function("() => /Running: .* [2-9][0-9]* requests answered/.test(document.body.innerText)", timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "chat_progress.png"), full_page=True)
        finished = page.get_by_text("Run finished: 2 of 2 texts done", exact=False)
        finished.wait_for(timeout=180_000)
        assert "so far" in finished.inner_text()
        page.get_by_text("book words in near-verbatim blocks", exact=False).wait_for(timeout=60_000)
        page.set_viewport_size({"width": 1400, "height": 2200})  # the results and the diff at once
        page.get_by_text("Diff view of").scroll_into_view_if_needed()
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / "chat_diff.png"), full_page=True)
        assert "<hidden>" in page.locator("body").inner_text().lower()  # the book's words shown as text, not markup
        browser.close()
    assert (ARTIFACTS / "chat_diff.png").stat().st_size > 20_000

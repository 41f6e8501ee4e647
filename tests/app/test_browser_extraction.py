"""Headless Chromium: Explore's extraction view with the demo model on a short text (a famous opening, a plain list,
a refrain said three times, counting to 40: the model continues the count, two windows at p_z ≥ 0.5): the cost
before running, then the coloured text with its legend, greedy passages outlined, the longest passage quoted and the
strip plot; we keep tests/artifacts/explore_extraction.png. The server fixture is tests/conftest.py's."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_browser import ARTIFACTS, CHROMIUM
from tests.support.page_actions import click_when_settled, set_number, shown_or_failed

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]

TEXT = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of foolishness, "
        "it was the epoch of belief, it was the epoch of incredulity. My list for Tuesday: oat milk, two lemons, "
        "basil, a loaf of rye and batteries for the <kitchen> clock. Row, row, row your boat, gently down the stream. "
        "Row, row, row your boat, gently down the stream. Row, row, row your boat, gently down the stream. Counting: "
        + ", ".join(str(i) for i in range(1, 41)) + ".")
SETTINGS = {"Prefix (tokens)": "20", "Suffix (tokens)": "20", "Stride (tokens)": "10"}


def test_explore_extraction_view_in_chromium(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server}/explore", timeout=120_000)
        box = page.locator("textarea").first
        box.wait_for(timeout=120_000)
        box.fill(TEXT)
        page.keyboard.press("Control+Enter")
        page.get_by_text("Extraction: can the model reproduce this text word for word?").click()
        for label, value in SETTINGS.items():
            set_number(page, label, value)
        cost = page.get_by_text("Cost before running:", exact=False)
        cost.wait_for(timeout=60_000)
        page.wait_for_function("() => document.body.innerText.includes('× 41 tokens (a lead token + prefix 20 + "
                               "suffix 20)')", timeout=60_000)
        assert "within the 50,000 one request may cost" in cost.inner_text()
        click_when_settled(page, page.get_by_role("button", name="Run extraction"))
        view = page.locator("#explore-extraction")
        shown_or_failed(page, view, 180_000)
        assert "Row, row, row your boat" in view.inner_text() and "<kitchen>" in view.inner_text()  # escaped, shown
        assert view.locator(".mia-x").count() >= 2 and page.locator(".mia-x-legend").count() == 1
        assert view.locator(".mia-x-greedy").count() >= 1  # the refrain, once said, comes back greedily
        assert page.locator(".mia-x-longest").count() == 1
        page.locator(".js-plotly-plot").last.wait_for(timeout=60_000)
        assert "under model demo" in page.get_by_text("Extraction of “It was", exact=False).inner_text()
        expander = page.locator('[data-testid="stExpander"]').filter(has=view)
        page.set_viewport_size({"width": 1400, "height": 2600})  # the whole view at once: nothing left unpainted
        expander.scroll_into_view_if_needed()
        page.mouse.move(5, 5)
        page.wait_for_timeout(1500)
        expander.screenshot(path=str(ARTIFACTS / "explore_extraction.png"))
        browser.close()
    assert (ARTIFACTS / "explore_extraction.png").stat().st_size > 20_000

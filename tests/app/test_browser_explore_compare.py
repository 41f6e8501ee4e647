"""Headless Chromium: Explore scores one text with the base demo model, then with demo-known, and shows the two results
side by side, each column under its model's stamp (the teaching point: the adapter knows its members); we keep
tests/artifacts/explore_compare.png. The server fixture is tests/conftest.py's."""
from __future__ import annotations

from pathlib import Path

import pytest

from mia_core import datasets
from tests.app.test_browser import ARTIFACTS, CHROMIUM
from tests.support.page_actions import click_when_settled, pick_model

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]


def member_text() -> str:
    """The first demo-wiki member paragraph: one demo-known's adapter learned, so its scores rise under it."""
    wiki = datasets.load("demo-wiki")
    return wiki[wiki.label == 1].iloc[0].text


def test_explore_compares_two_models_side_by_side_in_chromium(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server}/explore", timeout=120_000)
        box = page.locator("textarea").first
        box.wait_for(timeout=120_000)
        text = member_text()
        box.fill(text)
        page.keyboard.press("Control+Enter")
        click_when_settled(page, page.get_by_role("button", name="Score"))
        page.locator("#heatmap-min_k_pp").wait_for(timeout=180_000)
        assert page.locator(".st-key-explore_compare_previous").count() == 0  # one model so far: no comparison
        pick_model(page, "demo-known adapter")
        click_when_settled(page, page.get_by_role("button", name="Score"))
        previous = page.locator(".st-key-explore_compare_previous")
        current = page.locator(".st-key-explore_compare_current")
        previous.wait_for(timeout=180_000)
        current.locator("#compare-current-min_k_pp .mia-tok").first.wait_for(timeout=60_000)
        assert "Previous model: demo" in previous.inner_text() and "demo-known" not in previous.inner_text()
        assert "This model: demo-known" in current.inner_text()
        for column, which, model in ((previous, "previous", "demo"), (current, "current", "demo-known")):
            assert column.locator(f"#compare-{which}-min_k_pp .mia-tok").count() > 10
            assert column.get_by_text(f"Min-K%++ · {model}", exact=True).count() == 1
            assert "fingerprint" in column.inner_text() and " ".join(text.split()[:4]) in column.inner_text()
        left, right = previous.bounding_box(), current.bounding_box()
        assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 5  # two columns, level
        tokens = current.locator("#compare-current-min_k_pp .mia-tok")  # the right-hand column's right-most token:
        rightmost = max(range(tokens.count()), key=lambda i: tokens.nth(i).bounding_box()["x"])  # its details
        tokens.nth(rightmost).hover()  # open inside the heatmap's box, never past the page's edge
        tip = tokens.nth(rightmost).locator(".mia-tip")
        tip.wait_for(state="visible", timeout=10_000)
        box, heatmap = tip.bounding_box(), current.locator("#compare-current-min_k_pp").bounding_box()
        assert heatmap["x"] <= box["x"] and box["x"] + box["width"] <= heatmap["x"] + heatmap["width"] + 1 <= 1400
        page.get_by_text("Side by side: the previous model and this one").evaluate(
            "e => e.scrollIntoView({block: 'start'})")  # the heading at the top, both columns below it
        page.mouse.move(5, 5)  # no token tooltip over the columns
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "explore_compare.png"))
        page.get_by_role("button", name="Clear the comparison").click()
        page.locator(".st-key-explore_compare_previous").wait_for(state="detached", timeout=60_000)
        assert page.locator("#heatmap-min_k_pp .mia-tok").count() > 10  # this model's result stays
        browser.close()
    assert (ARTIFACTS / "explore_compare.png").stat().st_size > 10_000

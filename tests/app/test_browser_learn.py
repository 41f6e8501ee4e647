"""Headless Chromium: Learn lists the methods in teaching order with their papers and failure notes, and a toy
rescores when a token's log p is edited; we keep tests/artifacts/learn_page.png (and learn_toy.png, learn_order.png,
learn_dc_pdd.png).
The server fixture is tests/conftest.py's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mia_core import METHODS
from mia_core.api import teaching_order
from tests.app.test_browser import ARTIFACTS, CHROMIUM
from ui.learn_toys import TOY

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # the browser tests skip without playwright; the name is only used inside them
    PlaywrightTimeout = TimeoutError

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]


def test_learn_page_in_chromium(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server}/learn", timeout=120_000)
        summaries = page.locator('[data-testid="stExpander"] summary')
        summaries.first.wait_for(timeout=120_000)
        page.get_by_text("Loss (−mean NLL) on the toy").wait_for(timeout=60_000)
        order = teaching_order()
        last = f"{len(order)}. {METHODS[order[-1]].label}"  # the page draws its entries in turn: wait for the last
        summaries.filter(has_text=last).first.wait_for(timeout=60_000)
        shown = [line for s in summaries.all() if (line := s.inner_text().strip().split("\n")[-1].strip())[0].isdigit()]
        # (the sidebar's model status is an expander too; its label starts with no number)
        assert len(shown) == len(order)
        assert all(line.startswith(f"{n + 1}. {METHODS[m].label}") for n, (line, m) in enumerate(zip(shown, order)))
        assert page.get_by_text("arxiv.org/abs/2310.16789", exact=False).count() >= 1  # Min-K%'s link (closed entry)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "learn_page.png"))
        loss = page.locator('[data-testid="stExpander"]').filter(has_text="1. Loss (−mean NLL)").first
        edited = np.array(TOY["log p"], dtype=float)
        edited[0] = -0.5
        value = page.get_by_text(f"{edited.mean():.4f}", exact=True)
        grid = loss.locator('[data-testid="stDataFrame"]').first
        for attempt in range(4):  # a click during a rerun's layout can miss the cell: try again, then fail
            _edit_first_log_p(page, grid, "-0.5")
            try:
                value.wait_for(timeout=20_000)  # rescored by loss's own code
                break
            except PlaywrightTimeout:
                if attempt == 3:
                    raise
        value.evaluate("e => e.scrollIntoView({block: 'center'})")  # the edited table above, the token scores below
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "learn_toy.png"))
        page.get_by_text(f"3. {METHODS['min_k'].label}", exact=False).first.evaluate(
            "e => e.scrollIntoView({block: 'start'})")  # the closed entries from the third on, in order
        page.mouse.move(5, 5)
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "learn_order.png"))
        dc_pdd = f"{order.index('dc_pdd') + 1}. {METHODS['dc_pdd'].label}"
        page.locator('[data-testid="stExpander"] summary').filter(has_text=dc_pdd).first.click()  # its toy needs counts
        result = page.get_by_text(f"{METHODS['dc_pdd'].label} on the toy", exact=True)
        result.wait_for(timeout=60_000)
        result.evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "learn_dc_pdd.png"))
        browser.close()
    assert (ARTIFACTS / "learn_page.png").stat().st_size > 10_000


def _edit_first_log_p(page, grid, text: str) -> None:
    """Type `text` into the first token's log p cell of the toy's grid and commit it (the page reruns)."""
    page.keyboard.press("Escape")  # closes an editor a missed attempt left open
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 30, box["y"] + 35 + 17)  # the first token's cell (rows of 35 px under the header)
    page.keyboard.press("ArrowRight")  # its log p
    page.keyboard.press("Enter")  # opens the cell's editor
    page.wait_for_timeout(500)
    page.keyboard.press("Control+A")
    page.keyboard.type(text, delay=50)
    page.wait_for_timeout(300)
    page.keyboard.press("Enter")  # commits the edit

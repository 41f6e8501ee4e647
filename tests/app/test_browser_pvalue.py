"""Explore never waits for its p-value: on a server whose cache holds no reference set yet, a scored text's result
shows at once, and the p-value's place — at the top of the result, above the heatmaps — says how far the demo's
known non-members are scored in the background ("p-value: scoring … 47 of 120 texts, ETA …"). Its own dashboard,
with a fresh cache (the demo model linked in), so the reference set is surely not kept; tests/artifacts/
explore_pvalue_pending.png."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.test_browser import ARTIFACTS, CHROMIUM
from tests.support.dashboard import running_dashboard
from tests.support.demo_cache import fresh_cache_with_demo
from tests.support.page_actions import click_when_settled

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]


def test_the_p_values_progress_shows_at_the_top_of_the_result(tmp_path):
    from playwright.sync_api import sync_playwright

    env = {"MIA_LENS_CACHE": str(fresh_cache_with_demo(tmp_path / "cache")),
           "MIA_LENS_STORE": str(tmp_path / "store.duckdb")}
    ARTIFACTS.mkdir(exist_ok=True)
    with running_dashboard(env, tmp_path / "server.log") as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}/explore", timeout=120_000)
            page.locator("textarea").first.wait_for(timeout=120_000)
            click_when_settled(page, page.get_by_role("button", name="Score"))
            heatmap = page.locator("#heatmap-min_k_pp")
            heatmap.wait_for(timeout=180_000)  # the result, drawn while the known non-members are still scored
            status = page.get_by_text("p-value: scoring the demo's 120 known non-members", exact=False).first
            status.wait_for(timeout=60_000)
            assert " of 120 texts" in status.inner_text()
            assert status.bounding_box()["y"] < heatmap.bounding_box()["y"]  # at the top of the result
            page.screenshot(path=str(ARTIFACTS / "explore_pvalue_pending.png"))
        finally:
            browser.close()

"""Headless Chromium on the dashboard with a model served by a real vLLM engine, chosen from a link: the link's URL is
loaded only once confirmed, the sidebar says where the model is served, Explore scores a text with what the server
allows and names what it refuses; we keep tests/artifacts/served_explore.png
and served_refusals.png."""
from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.app.test_browser import ARTIFACTS, CHROMIUM
from tests.support.page_actions import click_when_settled

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]


def test_a_served_model_from_a_link_in_chromium(server, vllm_demo):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    spec = f"{vllm_demo.url}/v1?model=demo"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"{server}/explore?{urlencode({'model': 'served', 'path': spec})}", timeout=120_000)
        confirm = page.get_by_role("button", name="Load this model")
        confirm.wait_for(timeout=120_000)  # a link's server is not asked anything before the visitor agrees
        assert page.get_by_text("and the server it names", exact=False).count() == 1
        confirm.click()
        page.get_by_text("served at", exact=False).first.wait_for(timeout=180_000)
        page.get_by_text("Not available for this model", exact=False).first.wait_for(timeout=60_000)
        box = page.locator("textarea").first
        box.fill("The harbour of the old town was full of fishing boats at dawn.")
        page.keyboard.press("Control+Enter")
        click_when_settled(page, page.get_by_role("button", name="Score"))
        heatmap = page.locator("#heatmap-min_k")
        heatmap.wait_for(timeout=180_000)
        assert "fishing boats" in heatmap.inner_text()
        page.get_by_text("Not available for this model", exact=False).first.click()
        page.get_by_text("logprobs=full", exact=False).first.wait_for(timeout=30_000)
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "served_refusals.png"))
        heatmap.evaluate("e => e.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "served_explore.png"))
        browser.close()
    assert (ARTIFACTS / "served_explore.png").stat().st_size > 10_000

"""A real server and browser: a visitor starts scoring a long text on Explore and closes the tab; the server stops
that work within 10 s (it logs the cancellation), instead of computing for a browser that is gone (issue 31)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.app.test_browser import CHROMIUM
from tests.support.dashboard import running_dashboard
from tests.support.page_actions import click_when_settled

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]
CANCELLED = "Model work cancelled, its session ended: Scoring a text"


def test_closing_the_tab_stops_its_scoring_within_10_s(tmp_path):
    from playwright.sync_api import sync_playwright

    log_path = tmp_path / "server.log"
    env = {"MIA_LENS_STORE": str(tmp_path / "results.duckdb"), "MIA_LENS_CACHE": str(tmp_path / "cache")}
    with running_dashboard(env, log_path) as url:
        text = " ".join(f"Paragraph {i}: the merchant sailed north past the ancient harbour and the quiet "
                        "cathedral, where the bishop wrote of comets and glaciers." for i in range(250))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox",
                                                                        "--disable-gpu", "--no-first-run"])
            page = browser.new_page()
            page.goto(f"{url}/explore", timeout=120_000)
            box = page.locator("textarea").first
            box.wait_for(timeout=120_000)
            box.fill(text)
            page.keyboard.press("Control+Enter")
            page.get_by_text("Estimated cost", exact=False).first.wait_for(timeout=120_000)  # the model loaded
            click_when_settled(page, page.get_by_role("button", name="Score"))
            page.get_by_text("Running the model", exact=False).first.wait_for(timeout=60_000)
            page.wait_for_timeout(2000)  # the model is computing (≈ 6,000 tokens: tens of seconds on a CPU)
            assert CANCELLED not in log_path.read_text()
            page.close()
            closed = time.monotonic()
            while CANCELLED not in log_path.read_text() and time.monotonic() - closed < 20:
                time.sleep(0.2)
            took = time.monotonic() - closed
            browser.close()
        assert CANCELLED in log_path.read_text(), log_path.read_text()[-3000:]
        assert took < 10, f"cancelled {took:.1f} s after the tab closed"

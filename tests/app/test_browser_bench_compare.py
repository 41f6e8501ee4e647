"""A real browser reads the Benchmark comparison of two runs on the same texts: each run's AUROC [95% CI] in the
side-by-side table and the paired test block, whose ΔAUROC must be the difference of the table's two AUROCs; we keep
a screenshot (tests/artifacts/benchmark_compare.png, 1400 px wide)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from mia_core import METHODS
from tests.app.test_browser import ARTIFACTS, CHROMIUM, pick_model, run_benchmark, server, store_path  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]
#: "0.734 [0.650, 0.810]": an AUROC cell with its interval.
WITH_INTERVAL = re.compile(r"(\d\.\d{3}) \[(\d\.\d{3}), (\d\.\d{3})\]")


def grid_rows(table) -> list[dict[str, str]]:
    """A Streamlit table as the grid gives it to assistive technology: one dict (header → cell text) per row."""
    headers = [h.inner_text().strip() for h in table.locator('[role="columnheader"]').all()]
    rows = []
    for row in table.locator('[role="row"]').all()[1:]:
        cells = [c.inner_text().strip() for c in row.locator('[role="gridcell"]').all()]
        rows.append(dict(zip(headers[-len(cells):], cells)))
    return rows


def test_two_runs_compared_with_intervals_and_a_paired_test(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server}/benchmark", timeout=120_000)
        page.get_by_label("Texts per class (a seeded sample; fewer = faster)").wait_for(timeout=120_000)
        pick_model(page, "demo-known adapter")
        run_benchmark(page, "15", "#1 demo-known")
        pick_model(page, "embedded, offline")
        run_benchmark(page, "15", "#2 demo")  # the same 30 texts scored by the base model
        block = page.locator('[data-testid="stCode"]').filter(has_text="ΔAUROC").first
        block.wait_for(timeout=120_000)
        table = page.locator('[data-testid="stDataFrame"]').filter(
            has=page.locator('[role="columnheader"]', has_text="#2 demo ·")).first
        page.get_by_text("Metric side by side").first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.mouse.wheel(0, -90)  # below the page's header bar
        page.wait_for_timeout(1000)  # the metric, the table and the whole paired block in one 1400 × 1000 view
        page.screenshot(path=str(ARTIFACTS / "benchmark_compare.png"))
        text = block.inner_text()
        assert "#1 and #2 scored the same 30 texts (15 members, 15 non-members): compared text by text." in text
        rows = {r["method"]: r for r in grid_rows(table)}
        loss = rows.get(METHODS["loss"].label, {})
        assert loss, rows
        first = next(h for h in loss if h.startswith("#1 demo-known"))
        second = next(h for h in loss if h.startswith("#2 demo ·"))
        for name, row in rows.items():  # every run's cell: AUROC [lo, hi] with lo ≤ AUROC ≤ hi
            for run in (first, second):
                auroc, lo, hi = map(float, WITH_INTERVAL.fullmatch(row[run]).groups())
                assert lo <= auroc <= hi, (name, row[run])
        for line in text.splitlines()[3:]:  # "Loss: ΔAUROC (#2 − #1) = -0.123 [...], DeLong p = …"
            method, delta = re.match(r"(.+): ΔAUROC \(#2 − #1\) = (-?\d\.\d{3}) \[", line).groups()
            a1, a2 = (float(WITH_INTERVAL.fullmatch(rows[method][run]).group(1)) for run in (first, second))
            assert abs(float(delta) - (a2 - a1)) <= 0.0011, line  # the table's two AUROCs, each rounded
        assert len(text.splitlines()) == 3 + 4  # the page's four default methods
        browser.close()
    assert (ARTIFACTS / "benchmark_compare.png").stat().st_size > 10_000

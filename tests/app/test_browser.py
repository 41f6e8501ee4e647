"""A real browser: headless Chromium loads the running dashboard, scores a text, and we keep a screenshot.
The dashboard (`server`, its store `server_store`) is tests/conftest.py's: one for every browser test."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from mia_core import METHODS
from mia_core.audit.pdf import UNAVAILABLE as PDF_UNAVAILABLE
from tests.support.dashboard import ROOT
from tests.support.grid import WITH_INTERVAL, grid_rows, metrics_row
from tests.support.page_actions import (
    click_when_settled, pick_model, set_number, shown_or_failed, upload, wait_for_rerun,
)

ARTIFACTS = ROOT / "tests" / "artifacts"
#: Collects, in the page, every text a Streamlit progress bar shows (however briefly) into window.progressTexts.
PROGRESS_WATCH = """
window.progressTexts = [];
new MutationObserver(() => {
  for (const bar of document.querySelectorAll('[data-testid="stProgress"]')) {
    const text = bar.innerText.trim();
    if (text && window.progressTexts[window.progressTexts.length - 1] !== text) window.progressTexts.push(text);
  }
}).observe(document, {childList: true, subtree: true, characterData: true});
"""
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.integration, pytest.mark.browser,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium not installed (make test installs it)")]


def test_explore_page_in_chromium(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=flags)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{server}/explore", timeout=120_000)
        box = page.locator("textarea").first
        box.wait_for(timeout=120_000)
        box.fill("The quick brown fox jumps over the lazy dog.\nIt was the best of times, it was the worst of times.")
        page.keyboard.press("Control+Enter")
        click_when_settled(page, page.get_by_role("button", name="Score"))
        heatmap = page.locator("#heatmap-min_k_pp")
        heatmap.wait_for(timeout=180_000)
        assert page.locator(".mia-legend").count() >= 1
        assert heatmap.locator(".mia-tok").count() > 10
        assert "quick brown fox" in heatmap.inner_text()
        page.screenshot(path=str(ARTIFACTS / "explore_page.png"))
        heatmap.scroll_into_view_if_needed()
        page.locator(".mia-legend").first.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "explore_heatmap.png"))
        compared = page.get_by_text("known non-members (p =", exact=False).first
        compared.wait_for(timeout=180_000)  # the demo's reference set, scored once
        compared.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "explore_reference.png"))
        bad = ARTIFACTS / "binary.txt"
        bad.write_bytes(b"\x00\x01\x02 not text")
        page.locator('input[type="file"]').first.set_input_files(str(bad))
        page.get_by_text("binary.txt: looks binary, not text").wait_for(timeout=60_000)
        pick_model(page, "demo-known adapter")  # the scores above now belong to another model: greyed, stamped
        stale = page.get_by_text("These results were computed for model demo", exact=False).first
        stale.wait_for(timeout=180_000)
        stale_tokens = page.locator(".st-key-explore_results_stale .mia-tok")
        stale_tokens.first.wait_for(timeout=60_000)  # the greyed heatmap comes after its stamp (later on a busy machine)
        assert stale_tokens.count() > 10
        stale.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "explore_stale.png"))
        browser.close()
    assert (ARTIFACTS / "explore_heatmap.png").stat().st_size > 10_000


def test_benchmark_two_runs_compared_in_chromium(server):
    """Two Benchmark runs on the same texts (demo-known, then demo): the ROC, the run's command, both runs in one
    overlay, and the comparison: each run's AUROC [95% CI] side by side and the paired test block, whose ΔAUROC must be
    the difference of the table's two AUROCs (tests/artifacts/benchmark_compare.png, 1400 px wide). One test, as the
    comparison needs the two runs the others draw (each costs two model runs of 30 texts)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(PROGRESS_WATCH)  # every text a progress bar shows, kept as the page runs
        page.goto(f"{server}/benchmark", timeout=120_000)
        page.get_by_label("Texts per class (a seeded sample; fewer = faster)").wait_for(timeout=120_000)
        pick_model(page, "demo-known adapter")  # a new page load starts from the default model
        run_benchmark(page, "15", "#1 demo-known")
        shown = page.evaluate("window.progressTexts")  # the run's progress counted texts, naming the data and model
        assert any(re.search(r"Scoring demo-wiki under demo-known: \d+ of 30 texts", t) for t in shown), shown
        row = metrics_row(page)  # 15 non-members cannot resolve 5% FPR (20 needed): its cell is blank, not "None"
        assert row["TPR@5%FPR"] == "" and 0.5 < float(row["AUROC"]) <= 1, row  # (the grid reads out raw values)
        pick_model(page, "embedded, offline")
        run_benchmark(page, "15", "#2 demo")  # the same texts under demo: two runs to compare
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "benchmark_roc.png"))
        command = page.get_by_text("mia eval --model demo --input demo-wiki", exact=False).first
        command.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "benchmark_run.png"))
        compare = page.get_by_text("Compare runs", exact=False).first
        compare.scroll_into_view_if_needed()
        overlay = page.locator(".js-plotly-plot").filter(has_text="#1 demo-known").first
        overlay.wait_for(timeout=60_000)
        assert overlay.get_by_text("#2 demo ·", exact=False).count() >= 1  # both runs in one legend
        overlay.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        page.screenshot(path=str(ARTIFACTS / "benchmark_overlay.png"))
        check_the_paired_comparison(page)
        browser.close()
    assert (ARTIFACTS / "benchmark_compare.png").stat().st_size > 10_000


def check_the_paired_comparison(page) -> None:
    """Runs #1 demo-known and #2 demo compared: every AUROC cell within its interval, each ΔAUROC the difference of
    the table's two AUROCs, one line per default method; screenshot of the metric, the table and the paired block."""
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


def test_audit_page_shows_a_run_made_outside_the_dashboard(server, server_store):
    """A run scored by another process (as the CLI does) opens on the Book audit page by its id."""
    from playwright.sync_api import sync_playwright

    from mia_core.audit.jobs import AuditSettings, run_audit
    from mia_core.audit.sources import read_books, read_calibration
    from mia_core.model.options import ModelRef
    from mia_core.runs.store import ResultsStore

    # 256-word snippets separate the demo's members; 2 + 2 calibration books of 3 snippets cannot pin the FPR down
    settings = AuditSettings(snippet_words=256, max_snippets_per_book=3)
    result = run_audit(ModelRef("demo-known"), read_books("demo-books")[0], read_calibration("demo-books")[0], settings,
                       ResultsStore(server_store))
    run_id = result.run["run_id"]
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"{server}/audit?run={run_id}", timeout=120_000)
        page.get_by_text(f"Run {run_id}:").wait_for(timeout=180_000)
        # the gate withholds every verdict (FPR 0% of 6 non-member snippets, an interval up to 58%)
        page.get_by_text("The calibration is too weak for a verdict, so none is given").wait_for(timeout=60_000)
        if not PDF_UNAVAILABLE:  # the report as PDF downloads from the page (WeasyPrint needs Pango: make pdf-deps)
            with page.expect_download(timeout=120_000) as download:
                page.get_by_role("button", name="Report (PDF)").click()
            assert download.value.suggested_filename == f"audit_{run_id}_demo-known_report.pdf"  # by run and model
            assert open(download.value.path(), "rb").read(5) == b"%PDF-"
            wait_for_rerun(page)  # the click's rerun ends
        page.get_by_text("Books, highest estimated prevalence first").scroll_into_view_if_needed()
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(ARTIFACTS / "audit_page.png"))
        table = page.get_by_test_id("stDataFrame").filter(has_text="verdict").first
        table.scroll_into_view_if_needed()
        box = table.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1400  # the whole table, no scrolling
        # the grid draws its cells on a canvas: that verdict is its first, pinned column is the AppTest's to check
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "audit_books.png"))
        page.locator("summary").filter(has_text="— score").first.click()  # snippet heatmaps are collapsed
        page.locator(".mia-heatmap").first.wait_for(timeout=120_000)
        page.locator(".mia-heatmap").first.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "audit_drilldown.png"))
        extraction_from_the_page(page, server, server_store.parent)
        browser.close()
    assert (ARTIFACTS / "audit_page.png").stat().st_size > 10_000
    assert (ARTIFACTS / "audit_extraction.png").stat().st_size > 10_000


#: The MIT license: copied into countless repositories, so a small model may reproduce parts of it word for word.
MIT = ("Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated "
       "documentation files (the \"Software\"), to deal in the Software without restriction, including without "
       "limitation the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the "
       "Software, and to permit persons to whom the Software is furnished to do so, subject to the following "
       "conditions:\n\nThe above copyright notice and this permission notice shall be included in all copies or "
       "substantial portions of the Software.\n\nTHE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, "
       "EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR "
       "PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, "
       "DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN "
       "CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.\n")


def extraction_from_the_page(page, server: str, folder: Path) -> None:
    """A tiny audit started on the page with the Extraction box ticked: uploaded books (the MIT license to audit),
    its cost told before it runs, then the report's extraction section on the page."""
    from tests.support.tiny import random_texts

    files = {"members.txt": " ".join(random_texts(12, seed=1)), "others.txt": " ".join(random_texts(12, seed=2)),
             "mit-license.txt": MIT}
    for name, text in files.items():
        (folder / name).write_text(text)
    page.goto(f"{server}/audit", timeout=120_000)
    page.get_by_text("Calibration books").wait_for(timeout=120_000)
    for radio in ("audit_cal_choice", "audit_books_choice"):  # calibration, then the books to audit: uploads
        page.locator(f".st-key-{radio}").get_by_text("Upload", exact=True).click()
    page.locator('input[type="file"]').nth(2).wait_for(state="attached", timeout=60_000)
    for i, name in enumerate(files):
        upload(page, i, folder / name)
    set_number(page, "Words per snippet", 64)
    click_when_settled(page, page.get_by_text("Extraction: can the model reproduce these books word for word?"))
    cost = page.get_by_text("Extraction cost before it runs", exact=False)
    cost.wait_for(timeout=120_000)
    assert "within the" in cost.inner_text()
    click_when_settled(page, page.get_by_role("button", name="Run audit"))
    heading = page.get_by_role("heading", name="Verbatim extraction")
    shown_or_failed(page, heading, 300_000)
    assert page.get_by_text("mit-license", exact=False).count() >= 1
    heading.scroll_into_view_if_needed()
    page.locator(".js-plotly-plot").filter(has_text="max p_z").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / "audit_extraction.png"), full_page=False)


def run_benchmark(page, per_class: str, run: str) -> None:
    """Run the Benchmark page's default methods on that many demo texts per class; wait until run `run` ("#1 demo")
    is drawn."""
    set_number(page, "Texts per class (a seeded sample; fewer = faster)", per_class)
    click_when_settled(page, page.get_by_role("button", name="Run", exact=True))
    shown_or_failed(page, page.get_by_text(f"Run {run} ·", exact=False), 300_000)
    page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
    page.wait_for_timeout(1500)


def choose(page, label: str, option: str) -> None:
    """Pick `option` in the Streamlit multiselect whose label is `label` (open it, type the name: its list is drawn
    only where it scrolls, so a long list may not hold the option until filtered; click the option by its name). The
    rerun a previous choice started is awaited first: it redraws the box and drops what was typed (once in CI)."""
    wait_for_rerun(page)
    box = page.locator('[data-testid="stMultiSelect"]').filter(has_text=label).first.locator("input")
    box.click()
    box.fill(option)
    page.get_by_role("option", name=option, exact=True).click()
    page.keyboard.press("Escape")
    page.wait_for_timeout(500)


def test_new_methods_in_chromium(server):
    """The Benchmark page's helper-text section once ReCaLL is chosen, and Gap-K% and SURP heatmaps on Explore."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        page.goto(f"{server}/benchmark", timeout=120_000)
        page.get_by_label("Texts per class (a seeded sample; fewer = faster)").wait_for(timeout=120_000)
        choose(page, "Methods", "ReCaLL")
        page.get_by_text("n_shots: used by ReCaLL").wait_for(timeout=60_000)
        assert page.get_by_text("these rows are scored by no method", exact=False).count() == 1
        page.get_by_text("these rows are scored by no method", exact=False).scroll_into_view_if_needed()
        page.mouse.wheel(0, 250)  # the whole section, from the method list to the split caption
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "benchmark_helpers.png"))
        page.goto(f"{server}/explore", timeout=120_000)
        box = page.locator("textarea").first
        box.wait_for(timeout=120_000)
        box.fill("The castle was built in 1287 by monks of the Cistercian order.\nIt burned down twice.")
        page.keyboard.press("Control+Enter")
        methods = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Methods (two are shown").first
        methods.get_by_role("button", name="Clear all").click()
        choose(page, "Methods (two are shown", "Gap-K%")
        choose(page, "Methods (two are shown", "SURP")
        click_when_settled(page, page.get_by_role("button", name="Score"))
        heatmap = page.locator("#heatmap-gap_k")
        heatmap.wait_for(timeout=180_000)
        assert page.locator("#heatmap-surp .mia-tok").count() > 10
        assert page.get_by_text("the chosen windows", exact=False).count() >= 1
        heatmap.scroll_into_view_if_needed()
        page.wait_for_timeout(800)
        page.screenshot(path=str(ARTIFACTS / "explore_gap_k_surp.png"))
        browser.close()
    assert (ARTIFACTS / "explore_gap_k_surp.png").stat().st_size > 10_000

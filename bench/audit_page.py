"""The same demo book audit scored from the CLI and from the dashboard's page, in one run: seconds and their ratio.

CLI path: `mia audit-books` in a fresh process (the scoring in its main thread, as users run it).
Page path: a real `streamlit run app.py` server on a free port, the Book audit page opened in headless
Chromium, "Run audit" clicked, and the page left open, so its progress fragment polls the store while
the job's thread scores, exactly as a visitor's browser does.
Both score the demo plays with the embedded model (`demo`), Min-K%++ on 512-word snippets, at most
`--per-book` snippets per book (12 plays: 12 × per-book snippets), each in its own results store and
an empty statistics cache (the model files are shared through links), so neither reads the other's
statistics. Timed from the store: the scoring session's start (`started_at`) to its last committed batch
(`RunProgress`), the same clock for both; model loading and the analysis are not counted. Runs alternate
CLI, page, CLI, page … (`--repeats`) so a change in the machine's load hits both; the ratio is page / CLI
of the medians. Needs Chromium (`/usr/bin/chromium`) and playwright. The machine's load average is printed
before and after: on a shared machine, compare ratios, not seconds.

    .venv/bin/python bench/audit_page.py [--per-book 2] [--repeats 1] [--json out.json]

Measured on the 2-core CPU machine (load average 0.6 before, 2.0 after), `--per-book 1 --repeats 3`: CLI 37.2,
30.3, 34.6 s; page 33.7, 38.4, 39.9 s; medians 34.6 and 38.4 s, page/CLI 1.11. Before `ui.jobs` froze the
long-lived objects (Streamlit's full collection after every rerun), the page took 877 s for these 12 snippets.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import torch
from envelope import load as load_average, write_result

from mia_core.paths import cache_root
from mia_core.runs.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: The widget labels of the Book audit page the browser uses.
MAX_LABEL, RUN_LABEL = "At most this many snippets per book", "Run audit"


def fresh_env(folder: Path) -> dict[str, str]:
    """Environment with its own store and an empty statistics cache; the converted model and file hashes linked in."""
    cache = folder / "cache"
    cache.mkdir(parents=True)
    for shared in ("models", "file-hashes"):
        if (cache_root() / shared).exists():
            (cache / shared).symlink_to(cache_root() / shared)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(cache),
            "MIA_LENS_STORE": str(folder / "results.duckdb")}


def scoring_seconds(store_path: Path, timeout_s: float = 0.0) -> tuple[float, int]:
    """(seconds from the scoring session's start to its last batch, snippets) of the store's one run; with
    `timeout_s`, waits until the run is fully scored and its thread has analysed it (status done)."""
    deadline = time.monotonic() + timeout_s
    while True:
        store = ResultsStore(store_path)
        runs = store.runs()
        if not runs.empty:
            progress = store.run_progress(runs["run_id"].iloc[0])
            if progress.scored == progress.planned and progress.status in ("scored", "done"):
                return (progress.last_batch_at - progress.started_at).total_seconds(), progress.planned
        if time.monotonic() > deadline:
            raise TimeoutError(f"the run in {store_path} did not finish in {timeout_s:.0f} s")
        time.sleep(10.0)


def cli_run(folder: Path, per_book: int) -> dict:
    """`mia audit-books` on the demo plays in a fresh process; its scoring seconds from the store."""
    env = fresh_env(folder)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from mia_core.cli import main; main()", "audit-books", "--model", "demo",
                    "--calibration", "demo-books", "--books", "demo-books", "--max-snippets-per-book", str(per_book),
                    "--output-dir", str(folder / "report")], env=env, check=True, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - start
    seconds, n = scoring_seconds(Path(env["MIA_LENS_STORE"]))
    return {"path": "cli", "scoring_s": seconds, "snippets": n, "process_wall_s": wall}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dashboard(folder: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A dashboard server on a free port with its own store and cache (`fresh_env`), its log in `folder`; yields
    (its URL, its environment) and stops it on leaving."""
    env, port = fresh_env(folder), free_port()
    with (folder / "server.log").open("w") as log:
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
                                   "--server.port", str(port), "--server.address", "127.0.0.1",
                                   "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                                  cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield f"http://127.0.0.1:{port}", env
        finally:
            server.terminate()
            server.wait(timeout=30)


def goto_when_listening(page, url: str, wait_s: float = 120.0) -> None:
    """Open `url` in the browser page, trying again while the new server is not listening yet."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            page.goto(url, timeout=120_000)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def page_run(folder: Path, per_book: int, timeout_s: float) -> dict:
    """The Book audit page in headless Chromium on a fresh server: Run audit clicked, the page kept open until done."""
    from playwright.sync_api import sync_playwright  # optional: only this path needs a browser

    with dashboard(folder) as (url, env), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1100})
        goto_when_listening(page, f"{url}/audit")
        box = page.get_by_role("spinbutton", name=MAX_LABEL)
        box.wait_for(timeout=180_000)
        box.fill(str(per_book))
        box.press("Enter")
        page.wait_for_timeout(2000)
        button = page.get_by_role("button", name=RUN_LABEL)
        button.wait_for(timeout=180_000)
        start = time.perf_counter()
        button.click()
        done = time.monotonic() + timeout_s
        while True:  # the browser stays on the page (its fragment polls) while the store is read every 10 s
            try:
                seconds, n = scoring_seconds(Path(env["MIA_LENS_STORE"]))
                break
            except TimeoutError:
                if time.monotonic() > done:
                    raise
                page.wait_for_timeout(10_000)
        wall = time.perf_counter() - start
        browser.close()
    return {"path": "page", "scoring_s": seconds, "snippets": n, "click_to_done_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-book", type=int, default=2, help="snippets per demo play (12 plays)")
    parser.add_argument("--repeats", type=int, default=1, help="CLI/page pairs, alternating")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds a page run may take")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    load_before, load_words = os.getloadavg(), load_average()
    runs = []
    with tempfile.TemporaryDirectory(prefix="audit-page-bench-") as tmp:
        for i in range(args.repeats):
            runs.append(cli_run(Path(tmp) / f"cli{i}", args.per_book))
            print(json.dumps(runs[-1]), flush=True)
            runs.append(page_run(Path(tmp) / f"page{i}", args.per_book, args.timeout))
            print(json.dumps(runs[-1]), flush=True)
    cli = statistics.median(r["scoring_s"] for r in runs if r["path"] == "cli")
    page = statistics.median(r["scoring_s"] for r in runs if r["path"] == "page")
    out = {"per_book": args.per_book, "snippets": runs[0]["snippets"], "repeats": args.repeats, "cli_s": cli,
           "page_s": page, "ratio_page_over_cli": page / cli, "runs": runs, "torch_threads": torch.get_num_threads(),
           "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    if args.json:
        write_result(args.json, "audit-page", out, load_before=load_words)
    print(f"{out['snippets']} snippets: CLI {cli:.1f} s, page {page:.1f} s, page/CLI = {page / cli:.2f} "
          f"(load average {load_before[0]:.1f} before, {out['loadavg_after'][0]:.1f} after, {out['cpus']} CPUs)")


if __name__ == "__main__":
    main()

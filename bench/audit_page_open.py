"""How long the Book audit page takes to show its Run button after a click in the menu, against the 5 s it promises.

A real `streamlit run app.py` server (its own results store and an empty statistics cache, as `audit_page.py`
makes them) and headless Chromium. The server is warmed as a running dashboard is: the audit page opened once
under demo-known (its modules imported, the demo plays read), demo loaded. Then:

- **first**: a new session on Home under demo clicks "Book audit" while demo's speed is unknown, so the
  page starts measuring it in the background; timed from the click to the Run button, with whether the page said
  the estimate follows (it must not wait for the measurement), then to the estimate line.
- **again** (`--repeats`): the same with the speed known.

Each open also records the CPU seconds the server and Chromium spent on it: on a 2-core machine Chromium's drawing
is most of the work, so a busy machine stretches it. `--busy N` keeps N busy-looping processes running during the
opens, as a parallel test worker does in CI. The ratio printed is the median open over the bound (at most 1).

    .venv/bin/python bench/audit_page_open.py [--repeats 5] [--busy 0] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: the browser tests' page helpers

from audit_page import CHROMIUM, dashboard, goto_when_listening  # noqa: E402  (bench/ is on sys.path as a script)
from envelope import load as load_average, write_result  # noqa: E402
from tests.support.page_actions import text_at_button  # noqa: E402

#: The bound the dashboard promises (docs/dashboard.md): the audit page's inputs and Run button within 5 s.
BOUND_S = 5.0
#: What the page says while the model's speed is measured (or while an audit runs), instead of an estimate.
LATER = ("the time estimate follows", "the time estimate comes once")


def descendants_cpu() -> dict[int, tuple[str, float]]:
    """pid → (name, user + system CPU seconds) of every process below this one (the server and Chromium's)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, found = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        parents[int(entry.name)] = int(rest[1])
        found[int(entry.name)] = (name, (int(rest[11]) + int(rest[12])) / tick)
    ours, pending = {}, [os.getpid()]
    while pending:
        pid = pending.pop()
        for child, parent in parents.items():
            if parent == pid and child not in ours:
                ours[child] = found[child]
                pending.append(child)
    return ours


def cpu_spent(before: dict[int, tuple[str, float]], skip: set[int]) -> dict[str, float]:
    """CPU seconds since `before`, summed by kind: the server (python) and Chromium; the pids in `skip` not counted."""
    spent = {"server_cpu_s": 0.0, "chromium_cpu_s": 0.0}
    for pid, (name, seconds) in descendants_cpu().items():
        if pid in skip:
            continue
        kind = "chromium_cpu_s" if "chrom" in name else "server_cpu_s" if "python" in name or "streamlit" in name else None
        if kind:
            spent[kind] += seconds - before.get(pid, (name, 0.0))[1]
    return {k: round(v, 3) for k, v in spent.items()}


@contextmanager
def busy(n: int) -> Iterator[set[int]]:
    """`n` processes that keep a core each busy (a parallel test worker's load), stopped on leaving; yields their pids."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield {loop.pid for loop in loops}
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def open_audit(browser, url: str, model: str, skip: set[int]) -> dict:
    """A new session on Home under `model`, then "Book audit" from the menu: seconds to the Run button and the
    page's CPU, whether the estimate was promised for later at that moment, and seconds to the estimate line."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/?model={model}", timeout=120_000)
    page.get_by_text("Start here").wait_for(timeout=120_000)
    page.wait_for_timeout(2000)  # the Home page settled
    cpu = descendants_cpu()
    started = time.monotonic()
    page.get_by_role("link", name="Book audit").first.click()
    text = page.wait_for_function(text_at_button("Run audit"), timeout=120_000, polling="raf").json_value()
    opened = time.monotonic() - started
    spent = cpu_spent(cpu, skip)
    page.get_by_text("Estimate: ").first.wait_for(timeout=300_000)
    estimated = time.monotonic() - started
    page.close()
    return {"open_s": round(opened, 3), "estimate_later": any(words in text for words in LATER),
            "estimate_s": round(estimated, 3), **spent}


def measure(repeats: int, busy_loops: int) -> dict:
    """The first open (speed unknown) and `repeats` more (speed known) on one warmed server."""
    from playwright.sync_api import sync_playwright  # optional: only the browser benches need it

    with tempfile.TemporaryDirectory(prefix="audit-open-bench-") as tmp, dashboard(Path(tmp)) as (url, _), \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        warm = browser.new_page()
        goto_when_listening(warm, f"{url}/audit?model=demo-known")
        warm.get_by_text("Loaded demo-known").first.wait_for(timeout=180_000)
        warm.goto(f"{url}/?model=demo", timeout=120_000)
        warm.get_by_text("Loaded demo", exact=True).first.wait_for(timeout=180_000)
        with busy(busy_loops) as loops:
            first = open_audit(browser, url, "demo", loops)
            print(json.dumps({"case": "first", **first}), flush=True)
            again = []
            for _ in range(repeats):
                again.append(open_audit(browser, url, "demo", loops))
                print(json.dumps({"case": "again", **again[-1]}), flush=True)
        browser.close()
    return {"first": first, "again": again}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="opens with the model's speed known")
    parser.add_argument("--busy", type=int, default=0, help="busy-looping processes during the opens")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    load_before = load_average()
    runs = measure(args.repeats, args.busy)
    opens = [runs["first"], *runs["again"]]
    median = statistics.median(r["open_s"] for r in opens)
    case = {"opens": len(opens), "median_open_s": median, "max_open_s": max(r["open_s"] for r in opens),
            "ratio_median_over_bound": round(median / BOUND_S, 3), "first_open_s": runs["first"]["open_s"],
            "first_estimate_later": runs["first"]["estimate_later"], "first_estimate_s": runs["first"]["estimate_s"],
            "chromium_cpu_s": statistics.median(r["chromium_cpu_s"] for r in opens),
            "server_cpu_s": statistics.median(r["server_cpu_s"] for r in opens)}
    if args.json:
        write_result(args.json, "audit-page-open", {f"{args.busy} busy loops": case}, load_before=load_before,
                     note=f"Bound {BOUND_S:g} s; {os.cpu_count()} CPUs; every open in `runs`.", runs=runs)
    print(f"Run button after {median:.2f} s (median of {len(opens)}; at most {case['max_open_s']:.2f} s) = "
          f"{median / BOUND_S:.2f} of the {BOUND_S:g} s bound; the first open said the estimate follows: "
          f"{case['first_estimate_later']}; Chromium {case['chromium_cpu_s']:.2f} CPU s an open, the server "
          f"{case['server_cpu_s']:.2f} ({args.busy} busy loops, load {load_average()})")


if __name__ == "__main__":
    main()

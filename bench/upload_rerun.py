"""What a page rerun costs the server after a large upload on the Book audit page (issue 31, item 1), before and after.

The probe of the issue: a 4.8 MB zip holding 40 books of 49.9 MB of text each (2 GB inflated, within every bound),
uploaded as the books to audit; then a widget is changed a few times (each change reruns the page, no Run pressed).
For each tree (this checkout, and `--before REV` checked out as a git worktree) a real `streamlit run` server is
started on 127.0.0.1 with the demo model, headless Chromium uploads the zip, and the server's RSS (VmRSS) and CPU
seconds are read from /proc after the upload and after each rerun. Prints one table, all rows measured in one run.

    python3 bench/upload_rerun.py --before 11848a8 [--books 40 --reruns 4]
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
ENTRY_BYTES = 49_900_000


def build_zip(folder: Path, n_books: int) -> Path:
    """`n_books` entries of ENTRY_BYTES of English-like text each, deflated (a few MB on disk)."""
    path = folder / "books.zip"
    line = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
            "foolishness, it was the epoch of belief.\n").encode()
    block = line * (1_000_000 // len(line))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for i in range(n_books):
            with out.open(f"book{i:02d}.txt", "w") as entry:
                written = 0
                while written < ENTRY_BYTES:
                    part = block[:ENTRY_BYTES - written]
                    entry.write(part)
                    written += len(part)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_usage(pid: int) -> tuple[float, float, float]:
    """(RSS, peak RSS so far, both in MB; CPU seconds) of the server process."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    rss, peak = (int(status[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return rss, peak, cpu


def settle(pid: int, quiet_s: float = 3.0, timeout: float = 300.0) -> tuple[float, float, float]:
    """Wait until the server's CPU time stops growing for `quiet_s`; its usage then."""
    deadline = time.time() + timeout
    last = server_usage(pid)
    quiet_since = time.time()
    while time.time() < deadline:
        time.sleep(0.5)
        now = server_usage(pid)
        if now[2] - last[2] > 0.05:
            quiet_since = time.time()
        elif time.time() - quiet_since >= quiet_s:
            return now
        last = now
    return last


def probe(tree: Path, upload: Path, reruns: int, store: Path) -> list[tuple[str, float, float, float]]:
    """Start the dashboard of `tree`, upload the zip as the books to audit, rerun; (step, RSS MB, peak RSS MB,
    CPU s) rows."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_STORE": str(store), "PYTHONPATH": str(tree)}
    log = (store.parent / f"server-{tree.name}.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(tree / "app.py"), "--server.headless",
                             "true", "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            deadline = time.time() + 60
            while time.time() < deadline:
                try:
                    page.goto(f"http://127.0.0.1:{port}/audit", timeout=120_000)
                    break
                except Exception:
                    time.sleep(1)
            page.get_by_text("Words per snippet").wait_for(timeout=180_000)
            page.get_by_text("Loaded demo").wait_for(timeout=300_000)  # the sidebar's model, for the estimate
            rows.append(("page open, model loaded", *settle(proc.pid)))
            page.locator("label").filter(has_text="Upload").nth(1).click()  # the books to audit: upload
            page.locator('input[type="file"]').first.wait_for(state="attached", timeout=60_000)
            page.locator('input[type="file"]').first.set_input_files(str(upload))
            page.get_by_text(upload.name).first.wait_for(timeout=120_000)
            rows.append(("zip uploaded", *settle(proc.pid)))
            box = page.get_by_role("spinbutton", name="Words per snippet")
            for i in range(reruns):
                box.fill(str(256 + 16 * (i + 1)))
                box.press("Enter")
                rows.append((f"rerun {i + 1} (a widget changed)", *settle(proc.pid)))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a commit to compare with (checked out as a temporary git worktree)")
    parser.add_argument("--books", type=int, default=40)
    parser.add_argument("--reruns", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upload-rerun-") as tmp:
        folder = Path(tmp)
        upload = build_zip(folder, args.books)
        print(f"zip: {upload.stat().st_size / 1e6:.1f} MB holding {args.books} × {ENTRY_BYTES / 1e6:.1f} MB; "
              f"load {os.getloadavg()[0]:.2f}")
        trees = [("after", ROOT)]
        if args.before:
            before = folder / "before"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before],
                           check=True, capture_output=True)
            trees.insert(0, (f"before ({args.before})", before))
        try:
            for name, tree in trees:
                (folder / f"store-{tree.name}").mkdir()
                rows = probe(tree, upload, args.reruns, folder / f"store-{tree.name}" / "r.duckdb")
                print(f"\n{name}")
                print(f"{'step':34s} {'RSS MB':>8s} {'Δ RSS':>8s} {'peak MB':>8s} {'Δ peak':>8s} {'CPU s':>7s} "
                      f"{'Δ CPU s':>8s}   (Δ: since the step before; peak: VmHWM)")
                previous = rows[0]
                for row in rows:
                    step, rss, peak, cpu = row
                    print(f"{step:34s} {rss:8.0f} {rss - previous[1]:+8.0f} {peak:8.0f} {peak - previous[2]:+8.0f} "
                          f"{cpu:7.1f} {cpu - previous[3]:+8.1f}")
                    previous = row
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder / "before")],
                               capture_output=True)


if __name__ == "__main__":
    main()

"""A book audit with `--extraction` ÷ the same audit without it, in one run: seconds of each and their ratio.

The demo plays cut to their first `--words` words (12 books: 4 calibration, 8 audited), Min-K%++ under `demo` on
256-word snippets, then the same command with `--extraction --stride S` (each book's whole text in windows of
50 + 50 tokens every S tokens: (P + S) / stride = 2 forward tokens per text token at stride 50). Each command
runs in a fresh process with its own results store and an empty statistics cache (the model files are shared), so
neither reads the other's work; runs alternate plain, extraction, plain, … (`--repeats`) and the ratio is of the
medians. Last line: `ratio=<with ÷ without>`. On a shared machine, compare ratios, not seconds.

    .venv/bin/python bench/audit_extraction.py [--words 2000] [--stride 50] [--repeats 1]

Measured 2026-11-26 on the 2-core CPU machine with another job running (load average 2.5 before, 2.9 after),
defaults: without 82.3 s, with `--extraction --stride 50` 459.8 s, ratio 5.59. The windows feed 2 tokens per text
token, against 1 for the snippets, and every calibration book is tested too.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

import mia_core
from mia_core.paths import cache_root


def library(folder: Path, words: int) -> tuple[Path, Path]:
    """(calibration CSV, books CSV) of the demo plays cut to their first `words` words."""
    plays = mia_core.datasets.load("demo-books")
    plays = plays.assign(text=[" ".join(t.split()[:words]) for t in plays["text"]], book=plays["id"])
    calibration, books = folder / "calibration.csv", folder / "books.csv"
    plays[plays["role"] == "calibration"][["book", "text", "label"]].to_csv(calibration, index=False)
    plays[plays["role"] != "calibration"][["book", "text"]].to_csv(books, index=False)
    return calibration, books


def run(folder: Path, calibration: Path, books: Path, extra: list[str], name: str) -> float:
    """Seconds of one `mia audit-books` in a fresh process, store and statistics cache of its own."""
    home = folder / name
    cache = home / "cache"
    cache.mkdir(parents=True)
    (cache / "models").symlink_to(cache_root() / "models")  # the converted demo model, not its statistics
    env = {**os.environ, "MIA_LENS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "mia_core", "audit-books", "--model", "demo", "--method", "min_k_pp",
               "--calibration", str(calibration), "--books", str(books), "--snippet-words", "256",
               "--output-dir", str(home / "out"), "--store", str(home / "store.duckdb"), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{name} failed: {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--words", type=int, default=2000, help="words kept of each play")
    parser.add_argument("--stride", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="audit-extraction-"))
    try:
        calibration, books = library(folder, args.words)
        print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
        plain, extracted = [], []
        for r in range(args.repeats):
            plain.append(run(folder, calibration, books, [], f"plain{r}"))
            extracted.append(run(folder, calibration, books, ["--extraction", "--stride", str(args.stride)], f"x{r}"))
            print(f"repeat {r + 1}: without {plain[-1]:.1f} s, with --extraction --stride {args.stride} "
                  f"{extracted[-1]:.1f} s", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        print(f"ratio={statistics.median(extracted) / statistics.median(plain):.3f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

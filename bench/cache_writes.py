"""Scoring into an empty statistics cache with the writes on a writer thread, against writing them inline (CPU).

`score_texts` with the five statistics-only methods (bench/gpu.py's arm (s)) into a fresh, empty cache, so every
text's entry is written: with `writes_behind` (the default: `mia_core.model.cache_writes.WriteBehind`) and without
(each entry written on the scoring thread, as before), the two taking turns in one process, best of `--repeats`.
A third arm scores with a cache that keeps nothing: the floor the writes add to. Scores are compared between arms.

    .venv/bin/python bench/cache_writes.py [--model smoke-1b|smoke-7b|demo] [--texts 400] [--repeats 5]

Last line: `ratio=<seconds with the writer thread ÷ seconds writing inline>`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu as G  # noqa: E402  (bench/gpu.py: the workloads, the smoke models, the arms)
from host_parts import cpu_model  # noqa: E402  (the same models as the per-part profile)

import mia_core  # noqa: E402
from mia_core.model.stats_cache import StatsCache  # noqa: E402


def load(name: str, tmp: str):
    """The models of bench/host_parts.py, from this checkout."""
    return cpu_model(name, tmp, G, mia_core, StatsCache, torch)


ARMS = {"writer thread": (True, None), "inline writes": (False, None), "cache keeps nothing": (True, 0)}


def main() -> None:
    """Time the three arms in turns and print seconds, ms a text and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smoke-1b", choices=["smoke-1b", "smoke-7b", "demo"])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lm = load(args.model, tmp)
        texts = G.wiki_like(args.texts)
        freq = mia_core.build_frequency_table(lm.tokenizer, texts, vocab_size=lm.vocab_width)

        def run(behind: bool, max_bytes: int | None) -> tuple[float, np.ndarray]:
            lm.writes_behind = behind
            lm.stats_cache = StatsCache(tempfile.mkdtemp(dir=tmp), max_bytes=max_bytes)  # empty: every entry written
            start = time.perf_counter()
            scores = mia_core.score_texts(lm, texts, G.STATS_ONLY, freq=freq)
            seconds = time.perf_counter() - start
            return seconds, scores[G.STATS_ONLY].to_numpy(dtype=np.float64)

        run(True, None)  # warm
        best = {arm: float("inf") for arm in ARMS}
        scores = {}
        for _ in range(args.repeats):
            for arm, (behind, max_bytes) in ARMS.items():
                seconds, scores[arm] = run(behind, max_bytes)
                best[arm] = min(best[arm], seconds)
    n = len(texts)
    print(f"{args.model}: {n} WikiMIA-like texts, score_texts into an empty cache, best of {args.repeats}")
    for arm in ARMS:
        print(f"  {arm:20s} {best[arm]:8.3f} s  {1e3 * best[arm] / n:8.3f} ms a text")
    differ = max(float(np.nanmax(np.abs(scores[arm] - scores["inline writes"]))) for arm in ARMS)
    print(f"  scores: max |Δ| between arms = {differ:g}")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"ratio={best['writer thread'] / best['inline writes']:.3f}")


if __name__ == "__main__":
    main()

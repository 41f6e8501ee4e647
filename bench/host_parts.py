"""Where the host's time goes per text in `score_texts`, part by part, measured in one run (CPU).

One profiled `score_texts` call with the five statistics-only methods (bench/gpu.py's arm (s)) and a real, empty
statistics cache (every entry written, on the writer thread unless `--inline-writes`), after one warm-up call. For each part of the statistics pass — the model's
batch (forward, head and reduction), tokenising with offsets, padding a batch, splitting a batch's statistics,
assembling `TokenStats`, the cache's key, lookup and write, and each method — the cumulative seconds under cProfile
divided by the texts. The profiler slows Python a little, so read the parts against each other, not as wall time.

    .venv/bin/python bench/host_parts.py [--model smoke-1b|smoke-7b|demo] [--texts 400] [--inline-writes]

Last line: `ratio=<the host's parts per text ÷ the model's batch per text>`.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu as G  # noqa: E402  (bench/gpu.py: the workloads, the smoke models, the arms)

import mia_core  # noqa: E402
from mia_core.model.stats_cache import StatsCache  # noqa: E402

#: (module path under mia_core, function): what the part is called in the table.
PARTS = {
    ("model/forward.py", "batch_stats"): "the model's batch (forward, head, float32 reduction)",
    ("model/encoding.py", "encode_texts"): "tokenising with offsets",
    ("model/forward.py", "batch_arrays"): "padding a batch",
    ("model/pipeline.py", "_finish"): "splitting a batch's statistics",
    ("model/stats_model.py", "_assemble"): "assembling TokenStats",
    ("model/stats_cache.py", "key"): "cache key (SHA-256 of the text)",
    ("model/stats_cache.py", "get"): "cache lookup",
    ("model/stats_cache.py", "put"): "cache write (on this thread: writes_behind off)",
    ("model/cache_writes.py", "put"): "cache write (handed to the writer thread)",
    ("methods/loss.py", "loss"): "method: loss",
    ("methods/zlib.py", "zlib_ratio"): "method: zlib",
    ("methods/min_k.py", "min_k"): "method: min_k",
    ("methods/min_k_pp.py", "min_k_pp"): "method: min_k_pp",
    ("methods/dc_pdd/__init__.py", "dc_pdd"): "method: dc_pdd",
    ("scoring/stream.py", "score_batch"): "methods: all five, per finished batch (batch forms)",
    ("model/text_windows.py", "fill"): "joining a text's windows",
}
MODEL_PART = ("model/forward.py", "batch_stats")


def load(name: str, tmp: str):
    """`demo` (real weights, float32) or a smoke Llama of bench/gpu.py (bf16, random, built from a config)."""
    if name == "demo":
        return mia_core.load_model("demo", device="cpu")
    return G.random_llama(name.replace("smoke", "llama"), G.bench_tokenizer(True), torch.device("cpu"), torch.bfloat16,
                          True, StatsCache(os.path.join(tmp, "smoke")))


def part_seconds(profile: cProfile.Profile) -> dict[tuple[str, str], tuple[float, int]]:
    """Cumulative seconds and calls of every part in PARTS, from the profile."""
    found: dict[tuple[str, str], tuple[float, int]] = {}
    for (filename, _, function), (_, calls, _, cumulative, _) in pstats.Stats(profile).stats.items():
        key = (filename.split("mia_core/")[-1], function)
        if "mia_core/" in filename and key in PARTS:
            seconds, n = found.get(key, (0.0, 0))
            found[key] = (seconds + cumulative, n + calls)
    return found


def main() -> None:
    """Profile one call and print each part's milliseconds per text, the model's batch first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smoke-1b", choices=["smoke-1b", "smoke-7b", "demo"])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--inline-writes", action="store_true",
                        help="write the cache on this thread, as before the writer thread (cache_writes.WriteBehind)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lm = load(args.model, tmp)
        lm.writes_behind = not args.inline_writes
        texts = G.wiki_like(args.texts)
        freq = mia_core.build_frequency_table(lm.tokenizer, texts, vocab_size=lm.vocab_width)

        def run():
            lm.stats_cache = StatsCache(tempfile.mkdtemp(dir=tmp))  # empty: every text's entry is written
            return mia_core.score_texts(lm, texts, G.STATS_ONLY, freq=freq)

        run()  # warm
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        run()
        profile.disable()
        total = time.perf_counter() - start
    n = len(texts)
    parts = part_seconds(profile)
    print(f"{args.model}: {n} WikiMIA-like texts, score_texts {total:.3f} s under the profiler "
          f"({1e3 * total / n:.3f} ms a text)")
    for key, (seconds, calls) in sorted(parts.items(), key=lambda item: (item[0] != MODEL_PART, -item[1][0])):
        print(f"  {PARTS[key]:52s} {1e3 * seconds / n:9.3f} ms a text  ({calls} calls)")
    host = sum(seconds for key, (seconds, _) in parts.items() if key != MODEL_PART)
    print(f"  {'the host parts above, together':52s} {1e3 * host / n:9.3f} ms a text")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"ratio={host / parts[MODEL_PART][0]:.3f}")


if __name__ == "__main__":
    main()

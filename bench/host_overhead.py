"""Host work per text around the statistics pass, before and after a change, measured in one run (CPU).

On a GPU the device finishes small models' batches in milliseconds and the host's work per text — tokenising,
batching, assembling `TokenStats`, the methods — decides the throughput (docs/performance.md). Here the
same arms as `bench/gpu.py --parts throughput` run on the CPU, on the same WikiMIA-like texts:

- (b) `token_stats` (no cache) + the five statistics-only methods, each text scored by `mia_core.score` (gpu.py's (b));
- (s) `score_texts(texts, the five methods)`: the batch front door (statistics-only methods scored as each text's
  statistics arrive), with a statistics cache that keeps nothing;
- (c) the bare batched forward of the same batches (pre-tokenised, the model's own logits, nothing reduced);
- host ms per text = ((b) − the seconds spent inside the model's batch computation) ÷ texts: what the host does
  per text beyond running the model (on the CPU the batch computation is synchronous, so it is timed exactly).

Models: `smoke-1b` and `smoke-7b` (bench/gpu.py's `--smoke` Llamas, bf16, built from a config) and `demo` (real
weights, float32). Each tree — this checkout and the package at `--before REV` (`git archive`) — runs each model
in a fresh interpreter, the trees taking turns `--repeats` times; each process keeps the fastest of `--inner`
rounds of every arm, and the table shows the median over processes. Scores of (b) are compared across the trees.

    .venv/bin/python bench/host_overhead.py --before e8a0769 [--models smoke-1b,smoke-7b,demo] [--repeats 3]

Last line: `ratio=<host ms per text, after ÷ before, on smoke-1b>`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from contract import extract
from envelope import load as load_average, write_result

ROOT = Path(__file__).resolve().parents[1]
CASE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[4])  # bench/ of the current checkout: the workloads and the arms
import numpy as np, torch
import gpu as G
import mia_core
from mia_core.model.stats_cache import StatsCache
try:  # where the model's batch computation is, in this tree
    from mia_core.model import pipeline as holder
    name = "batch_stats"
except ImportError:
    from mia_core.model import forward as holder
    name = "_batch_stats"

model, n, inner = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
texts = G.wiki_like(n)
if model == "demo":
    lm = mia_core.load_model("demo", device="cpu")
else:
    lm = G.random_llama(model.replace("smoke", "llama"), G.bench_tokenizer(True), torch.device("cpu"), torch.bfloat16,
                        True, StatsCache(sys.argv[5] + "/stats"))
lm.stats_cache = StatsCache(sys.argv[5] + "/stats", max_bytes=0)  # (s) goes through the cache, which keeps nothing
inside = [0.0]
real = getattr(holder, name)
def timed_batch(*args, **kwargs):
    start = time.perf_counter()
    try:
        return real(*args, **kwargs)
    finally:
        inside[0] += time.perf_counter() - start
setattr(holder, name, timed_batch)
freq = mia_core.build_frequency_table(lm.tokenizer, texts, vocab_size=lm.vocab_width)
budget = lm.auto_batch_tokens()
batches = G.bare_batches(lm, texts, budget)

def arm_b():
    return G.ours(lm, texts, freq, budget)
def arm_s():
    return mia_core.score_texts(lm, texts, G.STATS_ONLY, freq=freq)
def arm_c():
    G.bare_forward(lm, batches)

best = {}
arm_b(); arm_s(); arm_c()  # warm
for _ in range(inner):
    for arm, fn in (("c", arm_c), ("b", arm_b), ("s", arm_s)):
        inside[0] = 0.0
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
        if arm not in best or seconds < best[arm][0]:
            best[arm] = (seconds, inside[0])
        if arm == "b":
            scores = out
tokens = sum(len(ids) + 1 for ids, _ in lm._encode_many(texts))
print(json.dumps({"texts": len(texts), "tokens": tokens, **{f"seconds_{a}": s for a, (s, _) in best.items()},
                  **{f"model_{a}": m for a, (_, m) in best.items()}, "scores": scores}))
"""


def run(model: str, n: int, inner: int, env: dict, cwd: Path, tmp: Path) -> dict:
    """One model in a fresh interpreter of one tree: the fastest of `inner` rounds of each arm, and (b)'s scores."""
    env = {**env, "MIA_LENS_CACHE": str(tmp), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", CASE, model, str(n), str(inner), str(ROOT / "bench"), str(tmp)],
                          env=env, cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"error: {model} failed in {cwd}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict:
    """Median over processes of each arm's seconds, and the figures derived from them."""
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k.startswith(("seconds_", "model_"))}
    n = runs[0]["texts"]
    return {**med, "texts": n, "tokens": runs[0]["tokens"],
            "b_over_c": med["seconds_b"] / med["seconds_c"], "s_over_c": med["seconds_s"] / med["seconds_c"],
            "host_ms_b": 1e3 * (med["seconds_b"] - med["model_b"]) / n,
            "host_ms_s": 1e3 * (med["seconds_s"] - med["model_s"]) / n,
            "b_minus_c_ms": 1e3 * (med["seconds_b"] - med["seconds_c"]) / n}


def max_diff(a: dict, b: dict) -> float:
    """Largest |Δ| between two trees' scores, over every method and text."""
    return max(max(abs(x - y) for x, y in zip(a[m], b[m])) for m in a)


def main() -> None:
    """Run every model in both trees, in turns, and print one line per model and tree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the git revision to compare with")
    parser.add_argument("--models", default="smoke-1b,smoke-7b,demo")
    parser.add_argument("--texts", type=int, default=400, help="WikiMIA-like texts for the smoke models")
    parser.add_argument("--demo-texts", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3, help="processes per tree and model, in turns")
    parser.add_argument("--inner", type=int, default=3, help="rounds of each arm per process (the fastest counts)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    load_before = load_average()
    results: dict = {}
    print(f"{'model':9s} {'tree':6s} {'texts':>5s} {'tokens':>7s} {'(b) s':>7s} {'(s) s':>7s} {'(c) s':>7s} "
          f"{'(b)÷(c)':>7s} {'(s)÷(c)':>7s} {'host ms/text (b)':>16s} {'(s)':>6s} {'(b−c)/text ms':>13s}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"after": ({**os.environ}, ROOT), "before": (extract(args.before, Path(tmp) / "before"), Path(tmp) / "before")}
        for model in args.models.split(","):
            n = args.demo_texts if model == "demo" else args.texts
            runs: dict[str, list[dict]] = {"after": [], "before": []}
            for i in range(args.repeats):
                for name, (env, cwd) in trees.items():
                    runs[name].append(run(model, n, args.inner, env, cwd, Path(tmp) / f"{model}-{name}-{i}"))
            row = {name: summary(r) for name, r in runs.items()}
            row["max_score_diff"] = max_diff(runs["after"][-1]["scores"], runs["before"][-1]["scores"])
            row["host_ratio"] = row["after"]["host_ms_b"] / row["before"]["host_ms_b"]
            results[model] = row
            for name in ("before", "after"):
                r = row[name]
                print(f"{model:9s} {name:6s} {r['texts']:5d} {r['tokens']:7d} {r['seconds_b']:7.3f} {r['seconds_s']:7.3f} "
                      f"{r['seconds_c']:7.3f} {r['b_over_c']:7.2f} {r['s_over_c']:7.2f} {r['host_ms_b']:16.3f} "
                      f"{r['host_ms_s']:6.3f} {r['b_minus_c_ms']:13.3f}", flush=True)
            print(f"{model:9s} host ms/text after ÷ before: {row['host_ratio']:.2f}; max |Δ score| between the trees: "
                  f"{row['max_score_diff']:.3g}", flush=True)
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        write_result(args.json, "cpu-host-overhead", results, load_before=load_before, before_commit=args.before)
    first = next(iter(results))
    print(f"ratio={results[first]['host_ratio']:.3f}")


if __name__ == "__main__":
    main()

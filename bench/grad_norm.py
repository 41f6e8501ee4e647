"""grad_norm: per-sample gradients in batches (`torch.func`) vs one backward per text, on a tiny Llama and `demo`.

For each model, the same texts go through both paths of `mia_core.methods.grad_norm.engine`:
- wrt="params": `loop_param_norms` (one `torch.autograd.grad` per text, the reference) vs
  `batched_param_norms` (vmap(grad) over right-padded batches, per-sample gradients of the whole
  model at once: batch × model size of memory);
- wrt="inputs": `input_norms` one text per call vs all texts in one call (one backward per batch).
Runs alternate and the fastest of each counts; process CPU time is printed too. On a shared 2-core
machine two torch threads contend with other jobs (one run gave 3.8× where one thread gives 1.1×), so
compare with `OMP_NUM_THREADS=1`. Differences: the largest absolute and relative difference of the
kept features (per-tensor or per-position norms, p = ∞, 1, 2) and of the six scores (p × aggregate);
`--dtype float64` shows the two paths agree exactly, float32 adds rounding. `demo` is skipped when it
is not available offline. Which path `batched=None` takes for each model is printed. The last line is
`ratio=<loop time / batched time>` for wrt="params" on the last model measured.

    OMP_NUM_THREADS=1 .venv/bin/python bench/grad_norm.py [--models tiny,demo] [--texts 8] [--tokens 48] [--repeats 2] [--dtype float64]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from common import stdlib_prose  # noqa: E402  (bench/ is on sys.path when run as a script)
from tiny import random_texts, tiny_llama, tiny_tokenizer  # noqa: E402

import mia_core  # noqa: E402
from mia_core import LanguageModel  # noqa: E402
from mia_core.methods.grad_norm import combine, engine  # noqa: E402
from mia_core.model.stats_cache import StatsCache  # noqa: E402


def timed(fn):
    """(wall seconds, CPU seconds of this process, result)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu, result


def load(name: str, n_texts: int, n_tokens: int, dtype: str, cache: Path) -> tuple[LanguageModel, list[str]] | None:
    """The model and its texts: "tiny" (a 2-layer Llama, the tests' tokenizer) or a `load_model` spec."""
    if name == "tiny":
        tok = tiny_tokenizer(300)
        model = tiny_llama(len(tok), seed=0).to(torch.float64 if dtype == "float64" else torch.float32)
        lm = LanguageModel(model, tok, name="tiny llama", stats_cache=StatsCache(cache))
        return lm, random_texts(n_texts, seed=11, min_words=n_tokens // 3, max_words=n_tokens // 2)
    try:
        lm = mia_core.load_model(name, dtype=dtype)
    except Exception as err:  # noqa: BLE001  (not cached offline: skip, say why)
        print(f"{name}: skipped ({type(err).__name__}: {str(err)[:120]})")
        return None
    return lm, stdlib_prose(n_texts, n_tokens, lm.tokenizer)


def differences(a: list, b: list) -> tuple[float, float, float, float]:
    """Max |Δ| and max relative Δ of the features (norms), then of the six scores (p × aggregate)."""
    feats = max(float(np.abs(x.norms - y.norms).max()) for x, y in zip(a, b))
    rel = max(float((np.abs(x.norms - y.norms) / np.maximum(np.abs(x.norms), 1e-30)).max()) for x, y in zip(a, b))
    pairs = [(combine(x.norms[:, c], p, agg), combine(y.norms[:, c], p, agg))
             for x, y in zip(a, b) for c, p in enumerate(("inf", 1, 2)) for agg in ("mean", "global")]
    scores = max(abs(u - v) for u, v in pairs)
    return feats, rel, scores, max(abs(u - v) / max(abs(u), 1e-30) for u, v in pairs)


def bench(lm: LanguageModel, texts: list[str], repeats: int, gradient_bytes: int) -> float:
    """Print one model's timings and differences; return loop ÷ batched (wrt="params")."""
    plans = engine.plans_for(lm, texts, "auto", "sliding")
    n_tokens = sum(len(p.ids) for p in plans)
    n_params = sum(p.numel() for _, p in engine.unique_parameters(lm.model))
    per_chunk = engine._max_batch(lm, gradient_bytes)
    print(f"\n{lm.name} on {lm.device} ({lm.dtype}, {torch.get_num_threads()} threads), {n_params / 1e6:.2f}M parameters, "
          f"{len(texts)} texts, {n_tokens} tokens; auto path for params: "
          f"{'batched' if engine.vmap_suits(lm) else 'loop'}; per-sample gradients per chunk: {per_chunk}")
    engine.loop_param_norms(lm, plans[:1])  # warm-up of both paths
    engine.batched_param_norms(lm, plans[:3], gradient_bytes=gradient_bytes)
    best = {k: (float("inf"), float("inf")) for k in ("loop", "batched", "inputs loop", "inputs batched")}
    runs = {
        "loop": lambda: engine.loop_param_norms(lm, plans),
        "batched": lambda: engine.batched_param_norms(lm, plans, gradient_bytes=gradient_bytes),
        "inputs loop": lambda: [engine.input_norms(lm, [p])[0] for p in plans],
        "inputs batched": lambda: engine.input_norms(lm, plans),
    }
    out = {}
    for i in range(repeats):
        for key, fn in runs.items():
            wall, cpu, out[key] = timed(fn)
            best[key] = (min(best[key][0], wall), min(best[key][1], cpu))
            print(f"  run {i + 1}: {key:15s} {wall:8.2f} s (cpu {cpu:7.2f} s)", flush=True)
    for kind, loop, batched in (("params", "loop", "batched"), ("inputs", "inputs loop", "inputs batched")):
        feats, rel, scores, scores_rel = differences(out[loop], out[batched])
        ratio = best[loop][0] / best[batched][0]
        print(f"wrt={kind}: loop {best[loop][0]:.2f} s ({n_tokens / best[loop][0]:.0f} tok/s), batched "
              f"{best[batched][0]:.2f} s ({n_tokens / best[batched][0]:.0f} tok/s): loop / batched = {ratio:.2f} wall, "
              f"{best[loop][1] / best[batched][1]:.2f} CPU")
        print(f"  max |Δ| features {feats:.2e} (relative {rel:.2e}), scores {scores:.2e} (relative {scores_rel:.2e}): "
              f"{'within' if max(feats, scores) <= 1e-5 else 'ABOVE'} 1e-5 absolute")
    return best["loop"][0] / best["batched"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,demo", help="comma-separated: tiny and/or load_model specs")
    parser.add_argument("--texts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=2, help="alternate the paths; the fastest of each counts")
    parser.add_argument("--dtype", default="auto", help="float64: both paths in float64, to see them agree exactly")
    parser.add_argument("--gradient-gib", type=float, default=2.0, help="per-sample gradients a batch may hold")
    parser.add_argument("--cache", default="/tmp/mia-bench-grad-norm", help="statistics cache of the tiny model")
    args = parser.parse_args()
    torch.manual_seed(0)
    ratio = None
    for name in args.models.split(","):
        found = load(name.strip(), args.texts, args.tokens, args.dtype, Path(args.cache))
        if found is not None:
            ratio = bench(*found, args.repeats, int(args.gradient_gib * (1 << 30)))
    print(f"ratio={ratio:.3f}" if ratio is not None else "ratio=nan")


if __name__ == "__main__":
    main()

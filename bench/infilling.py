"""Infilling Score on `demo`: the KV-cache branches vs the authors' loop (one full pass per position).

Texts of 256 tokens (stdlib prose, `bench/common.py`), m = 5. Each implementation runs in its own
subprocess and is timed there on the same texts; runs alternate (fast, reference, fast, …) and the
fastest of each counts, because this machine is shared and noisy. Both skip positions whose true
token is the top-1 (exactly 0 by definition, no pass). Memory: peak resident set size
(`ru_maxrss`) of each worker process, and its excess over a baseline worker that only loads the
model and computes the statistics. Token scores are compared for both normalizations ("position"
is the default; its z-scores with small σ' amplify float32 rounding, so its relative difference is
printed too).

Exactness: in float32 the two paths add up the same products in different orders (a KV cache and a
4-D mask against one full pass), and "position" divides the resulting logit noise by σ′. So a third
worker loads the model in float64 (logits and statistics stay float64), runs the fast path on every
branch and the reference on every `--exact-stride`-th one: the two must agree to 1e-4 there, and the
float32 runs of both are compared with that float64 reference at the same positions, to show how far
float32 itself is from exact. Last line `ratio=<reference time / fast time>` (target ≥ 20 with
difference ≤ 1e-4).

    .venv/bin/python bench/infilling.py [--texts 2] [--tokens 256] [--m 5] [--repeats 1] [--exact-stride 8]
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NORMALIZATIONS = ("position", "anchor")


def worker(args) -> None:
    """One implementation (or the baseline) on the texts; writes token scores, times and memory to --out."""
    import torch
    from common import stdlib_prose

    import mia_core
    from mia_core.methods.infilling.engine import combine, fed_ids, plan_branches, primed_fast, primed_reference

    torch.manual_seed(0)
    lm = mia_core.load_model(args.model, dtype="float64" if args.worker == "exact" else "auto")
    texts = stdlib_prose(args.texts, args.tokens, lm.tokenizer)
    stats = lm.token_stats(texts, cache=False)
    if args.worker == "exact":
        return exact_worker(args, lm, stats)
    primed_of = {"fast": primed_fast, "reference": primed_reference}.get(args.worker)
    fulls = [fed_ids(lm, st) for st in stats]
    plans = [(full, plan_branches(st, full, args.m)) for full, st in zip(fulls, stats)]
    scores = {norm: [] for norm in NORMALIZATIONS}
    wall = cpu = 0.0
    if primed_of is not None:
        warm = lm.token_stats(["A short warm-up text for the kernels."], cache=False)[0]
        full = fed_ids(lm, warm)
        primed_of(lm, full, plan_branches(warm, full, args.m))
        start, start_cpu = time.perf_counter(), time.process_time()
        primed = [primed_of(lm, full, branches) for full, branches in plans]
        if lm.device.type == "cuda":
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        for st, (_, branches), p in zip(stats, plans, primed):
            for norm in NORMALIZATIONS:
                scores[norm].append(combine(st, branches, p, norm))
    np.savez(args.out, **{f"{norm}_{i}": r for norm in NORMALIZATIONS for i, r in enumerate(scores[norm])})
    Path(args.out + ".json").write_text(json.dumps({
        "seconds": wall, "cpu_seconds": cpu, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "n_scored": [s.n_scored for s in stats], "branches": [len(b) for _, b in plans], "device": str(lm.device),
        "dtype": str(lm.dtype), "model": lm.name, "threads": torch.get_num_threads()}))


def exact_worker(args, lm, stats) -> None:
    """float64: fast on every branch, reference on every stride-th; scores at the sampled positions."""
    from mia_core.methods.infilling.engine import combine, fed_ids, plan_branches, primed_fast, primed_reference

    out = {}
    for t, st in enumerate(stats):
        full = fed_ids(lm, st)
        branches = plan_branches(st, full, args.m)
        picked = list(range(0, len(branches), args.exact_stride))
        sample = [branches[i] for i in picked]
        fast = primed_fast(lm, full, branches)
        offsets = np.cumsum([0] + [len(b.targets) for b in branches])
        fast_sample = {key: np.concatenate([value[offsets[i]:offsets[i + 1]] for i in picked]) for key, value in fast.items()}
        reference = primed_reference(lm, full, sample)
        index = np.array([b.index for b in sample])
        out[f"index_{t}"] = index
        for norm in NORMALIZATIONS:
            out[f"{norm}_fast_{t}"] = combine(st, branches, fast, norm)
            out[f"{norm}_sample_fast_{t}"] = combine(st, sample, fast_sample, norm)[index]
            out[f"{norm}_sample_reference_{t}"] = combine(st, sample, reference, norm)[index]
    np.savez(args.out, **out)
    Path(args.out + ".json").write_text(json.dumps({"n_texts": len(stats), "dtype": str(lm.dtype)}))


def exact_report(args, folder: Path, fast32: dict[str, list[np.ndarray]],
                 ref32: dict[str, list[np.ndarray]]) -> list[str]:
    """Lines on float64 fast vs reference, and how far each float32 run is from the float64 reference."""
    out = str(folder / "exact.npz")
    subprocess.run([sys.executable, __file__, "--worker", "exact", "--out", out, "--texts", str(args.texts),
                    "--tokens", str(args.tokens), "--m", str(args.m), "--model", args.model,
                    "--exact-stride", str(args.exact_stride)], check=True)
    with np.load(out) as data:
        n = json.loads(Path(out + ".json").read_text())["n_texts"]
        index = [data[f"index_{t}"] for t in range(n)]
        lines = [f"float64 check on {sum(map(len, index))} sampled substituted positions (every {args.exact_stride}th):"]
        for norm in NORMALIZATIONS:
            ref64 = [data[f"{norm}_sample_reference_{t}"] for t in range(n)]
            exact = max(float(np.max(np.abs(data[f"{norm}_sample_fast_{t}"] - ref64[t]), initial=0)) for t in range(n))
            off32 = {name: max(float(np.max(np.abs(runs[norm][t][index[t]] - ref64[t]), initial=0)) for t in range(n))
                     for name, runs in (("reference", ref32), ("fast", fast32))}
            whole = max(float(np.max(np.abs(fast32[norm][t] - data[f"{norm}_fast_{t}"]))) for t in range(n))
            lines.append(f"  {norm!r}: float64 fast vs reference {exact:.2e} (target ≤ 1e-4); float32 vs the float64 "
                         f"reference: reference {off32['reference']:.2e}, fast {off32['fast']:.2e}; "
                         f"float32 fast vs float64 fast on every token {whole:.2e}")
    return lines


def run_worker(kind: str, args, folder: Path) -> tuple[dict, dict[str, list[np.ndarray]]]:
    out = str(folder / f"{kind}-{time.monotonic_ns()}.npz")
    cmd = [sys.executable, __file__, "--worker", kind, "--out", out, "--texts", str(args.texts),
           "--tokens", str(args.tokens), "--m", str(args.m), "--model", args.model]
    subprocess.run(cmd, check=True)
    info = json.loads(Path(out + ".json").read_text())
    with np.load(out) as data:
        return info, {norm: [data[f"{norm}_{i}"] for i in range(len(info["n_scored"])) if f"{norm}_{i}" in data]
                      for norm in NORMALIZATIONS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--m", type=int, default=5)
    parser.add_argument("--model", default="demo")
    parser.add_argument("--repeats", type=int, default=1, help="reference runs; the fast one runs repeats + 1 times")
    parser.add_argument("--exact-stride", type=int, default=8, help="float64 reference on every n-th branch")
    parser.add_argument("--worker", choices=["baseline", "fast", "reference", "exact"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        baseline, _ = run_worker("baseline", args, folder)
        fast, fast_scores = run_worker("fast", args, folder)
        runs = {"fast": [fast], "reference": []}
        for _ in range(args.repeats):  # alternate: reference, fast, reference, fast …
            ref, ref_scores = run_worker("reference", args, folder)
            runs["reference"].append(ref)
            runs["fast"].append(run_worker("fast", args, folder)[0])
        exact = exact_report(args, folder, fast_scores, ref_scores)
    t_fast = min(r["seconds"] for r in runs["fast"])
    t_ref = min(r["seconds"] for r in runs["reference"])
    cpu_ratio = min(r["cpu_seconds"] for r in runs["reference"]) / min(r["cpu_seconds"] for r in runs["fast"])
    n, branches = fast["n_scored"], fast["branches"]
    print(f"model {fast['model']} on {fast['device']} ({fast['dtype']}, {fast['threads']} threads), {len(n)} texts of "
          f"{n} scored tokens, m = {args.m}; positions needing a branch: {branches} (the others are top-1)")
    for kind, label in (("reference", "reference (one full-length pass per position)"),
                        ("fast", "fast (KV-cache branches, 4-D mask)")):
        peak = max(r["maxrss_mb"] for r in runs[kind])
        print(f"{label:47s} {min(r['seconds'] for r in runs[kind]):8.2f} s   peak RSS {peak:7.0f} MiB "
              f"({peak - baseline['maxrss_mb']:+.0f} MiB vs load + statistics only)")
    print(f"all runs, wall s: fast {[round(r['seconds'], 2) for r in runs['fast']]}, "
          f"reference {[round(r['seconds'], 2) for r in runs['reference']]}; CPU-time ratio {cpu_ratio:.1f}")
    for norm in NORMALIZATIONS:
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(fast_scores[norm], ref_scores[norm]))
        rel = max(float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))
                  for a, b in zip(fast_scores[norm], ref_scores[norm]))
        print(f"normalization {norm!r}: max |token score difference| {diff:.2e}, relative {rel:.2e} (target ≤ 1e-4)")
    print("\n".join(exact))
    print(f"speedup: {t_ref / t_fast:.1f}x (target ≥ 20)")
    print(f"ratio={t_ref / t_fast:.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()

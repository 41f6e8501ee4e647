"""GDS gradient features on `demo`: one backward per batch vs one backward per text (the paper's loop).

The loop is the paper's way: peft adapters active, `loss.backward()` per text, G read from each
`lora_B.weight.grad`. The batched path packs texts under a token budget, skips the LoRA branch (it
adds exactly zero since B = 0) and forms per-sample G from hooks (`mia_core.methods.gds.features.gradient_features`).

Prints the time of each path over the same texts, the largest feature difference per feature (Sparsity
counts |G| < 1e-6 and the eccentricities average over the top-10% set: one entry on the edge can flip
on a float32 rounding difference), and loop ÷ batched (target ≥ 3 on a 2-core CPU). Runs alternate and
the fastest of each counts (this machine is shared and noisy).

The floor: any way of getting these gradients runs the forward pass and back-propagates through every
layer (every layer has LoRA-B matrices), and the activation backward costs about one more forward. So
the bench also times a plain no-grad forward of the same batches (F) and prints loop ÷ 2F, the speedup
a batched path would reach if it cost nothing beyond those two passes. With `--dtype float64` both
paths run in float64 and agree to ~1e-14 on every feature (the float32 flips are rounding, not the
algorithm). Last line: `ratio=<speedup>`.

    .venv/bin/python bench/gds.py [--texts 24] [--tokens 128] [--repeats 3] [--dtype float64]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import stdlib_prose

import mia_core
from mia_core.methods.gds.features import (
    CPU_BATCH_TOKENS, FEATURES, GdsSettings, encode, features_loop, gradient_features,
)
from mia_core.model.forward import Segment, pack_batches, pad_right


def timed(fn):
    """(wall seconds, CPU seconds of this process, result)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return time.perf_counter() - start, time.process_time() - cpu, result


@torch.inference_mode()
def forward_only(lm, seqs: list[list[int]], batch_tokens: int) -> None:
    """Plain forward passes over the batches `gradient_features` would form: the cost floor's unit."""
    for batch in pack_batches([Segment(i, ids, 1) for i, ids in enumerate(seqs)], batch_tokens):
        ids, mask = pad_right([seqs[i] for i in batch])
        lm.model(input_ids=ids.to(lm.device), attention_mask=mask.to(lm.device), use_cache=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--model", default="demo")
    parser.add_argument("--dtype", default="auto", help="float64: both paths in float64, to see them agree exactly")
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the library's (1024 on CPU)")
    parser.add_argument("--repeats", type=int, default=3, help="alternate loop/batched runs; the fastest of each counts")
    args = parser.parse_args()
    torch.manual_seed(0)
    lm = mia_core.load_model(args.model, dtype=args.dtype)
    texts = stdlib_prose(args.texts, args.tokens, lm.tokenizer)
    settings = GdsSettings()
    n_tokens = sum(len(lm.tokenizer(t)["input_ids"]) + 1 for t in texts)
    print(f"model {lm.name} on {lm.device} ({lm.dtype}, {torch.get_num_threads()} threads), {len(texts)} texts, "
          f"{n_tokens} tokens, LoRA r={settings.r} alpha={settings.alpha}")

    gradient_features(lm, texts[:2], settings)  # warm-up
    t_loop = t_batched = c_loop = c_batched = t_forward = float("inf")
    seqs = encode(lm, texts, settings)
    for i in range(args.repeats):
        elapsed, _, _ = timed(lambda: forward_only(lm, seqs, args.batch_tokens or CPU_BATCH_TOKENS))
        t_forward = min(t_forward, elapsed)
        elapsed, cpu, loop = timed(lambda: features_loop(lm, texts, settings))
        t_loop, c_loop = min(t_loop, elapsed), min(c_loop, cpu)
        print(f"  run {i + 1}: loop {elapsed:7.1f} s (cpu {cpu:6.1f} s)", end="", flush=True)
        elapsed, cpu, batched = timed(lambda: gradient_features(lm, texts, settings, batch_tokens=args.batch_tokens))
        t_batched, c_batched = min(t_batched, elapsed), min(c_batched, cpu)
        print(f", batched {elapsed:7.1f} s (cpu {cpu:6.1f} s)", flush=True)
    rel = np.abs(batched - loop) / np.maximum(np.abs(loop), 1e-12)
    print(f"features per text: {loop.shape[1]} ({loop.shape[1] // 8} LoRA-B matrices x 8)")
    print(f"loop (1 backward per text)   {t_loop:8.2f} s  ({n_tokens / t_loop:6.0f} tok/s)")
    print(f"batched (1 backward/batch)   {t_batched:8.2f} s  ({n_tokens / t_batched:6.0f} tok/s)")
    print(f"no-grad forward, same batches {t_forward:8.2f} s  -> loop = {t_loop / t_forward:.1f} F, batched = "
          f"{t_batched / t_forward:.1f} F; loop / 2F = {t_loop / (2 * t_forward):.2f} (the speedup at the floor)")
    print(f"max |batched - loop|: {np.abs(batched - loop).max():.2e} abs, {rel.max():.2e} rel; "
          f"features off by > 1e-5 rel: {int((rel > 1e-5).sum())} of {rel.size}")
    kinds = rel.reshape(len(texts), -1, len(FEATURES))  # (texts, matrices, features)
    for i, name in enumerate(FEATURES):  # threshold/top-10% features can flip an entry on float32 rounding
        print(f"  {name:13s} max rel diff {kinds[..., i].max():.2e}, > 1e-5 in {int((kinds[..., i] > 1e-5).sum())}")
    print(f"speedup: {t_loop / t_batched:.2f}x wall, {c_loop / c_batched:.2f}x process CPU time (less sensitive to "
          "other jobs on the machine; compare the two)")
    print(f"ratio={t_loop / t_batched:.3f}")


if __name__ == "__main__":
    main()

"""Extraction on `demo`: our pass ÷ the bare batched forward of the same windows, and windows/tokens per second.

The bare forward feeds the same windows, in the same batches, and only computes the model's full logits (no
reduction); our pass computes the suffix rows' logits and reduces them to log q, rank and the top-k log-sum-exp
(target ≤ 1.15 on CPU). Then a "book" at --stride 50 and at 10: windows, forward tokens per text token, seconds.
Last line: `ratio=<extraction ÷ bare>`.

    .venv/bin/python bench/extraction.py [--plays 4] [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import mia_core
from mia_core.extract import ExtractionSettings
from mia_core.extract.forward import window_log10_pz
from mia_core.extract.windows import layout_text
from mia_core.model.language_model import CPU_BATCH_TOKENS


@torch.inference_mode()
def bare_forward(model, fed: np.ndarray, rows: int) -> None:
    """The model's own forward (full logits) over the same batches of windows."""
    for begin in range(0, len(fed), rows):
        model(input_ids=torch.from_numpy(fed[begin : begin + rows]), use_cache=False).logits


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plays", type=int, default=4, help="demo-books plays joined into one book (~4k tokens each)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    lm = mia_core.load_model("demo", device="cpu")
    text = "\n\n".join(mia_core.datasets.load("demo-books")["text"].tolist()[: args.plays])
    settings = ExtractionSettings(stride=50)
    layout = layout_text(lm, text, settings)
    fed = np.unique(layout.fed(np.arange(len(layout.starts))), axis=0)  # what the pass computes: distinct windows
    rows = max(1, CPU_BATCH_TOKENS // fed.shape[1])
    ours = best_of(args.repeats, lambda: window_log10_pz(lm.model, fed, settings, layout.n_lead,
                                                         batch_tokens=CPU_BATCH_TOKENS))
    bare = best_of(args.repeats, lambda: bare_forward(lm.model, fed, rows))
    print(f"{len(fed):,} windows of {fed.shape[1]} tokens, {rows} per batch, torch threads {torch.get_num_threads()}")
    print(f"bare batched forward: {bare:.2f} s   extraction pass: {ours:.2f} s   "
          f"({len(fed) / ours:.1f} windows/s, {fed.size / ours:,.0f} tokens/s)")
    for stride in (50, 10):
        s = ExtractionSettings(stride=stride)
        start = time.perf_counter()
        result = mia_core.extract.extract_texts(lm, [text], s, cache=False)[0]
        took = time.perf_counter() - start
        print(f"book of {result.n_text_tokens:,} tokens at stride {stride}: {result.n_windows:,} windows, "
              f"{s.forward_tokens_per_text_token():.0f} forward tokens per text token, {took:.1f} s")
    print(f"ratio={ours / bare:.3f}")


if __name__ == "__main__":
    main()

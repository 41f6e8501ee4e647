"""The core on a GPU: throughput against the authors' loop and the FLOP floor, bf16 correctness, OOM halving.

One script for a GPU machine (H100/H200 class), in parts that each write their numbers to
`--out/<part>.json` (inside the envelope of bench/envelope.py: copy them to bench/results/ under a new name) and
print a table:

- `throughput`: models `demo` (real weights), `llama-1b` (random, hidden 2048, 16 layers, vocab 128256),
  `llama-7b` (random, hidden 4096, 32 layers, vocab 32000) and `llama-135m` (random, demo's shape: hidden 576,
  30 layers, vocab 49152; for a machine the demo model's file cannot reach), bf16; both random models use a 32k
  byte-level BPE trained here on the workload sources (the 1B's logits are 128256 wide all the same). Workloads: WikiMIA-like (Wikipedia lead paragraphs cut to 32–256 words)
  and BookMIA-like (512-word snippets of Shakespeare's plays). Arms on the same texts:
  (a) the authors' loop (one text at a time, `labels=` loss, softmax and log_softmax materialised,
  as the Min-K%++ script; timed on every `--loop-stride`-th text, compared in tokens/s; `--loop-stride 0` skips it),
  (b) `token_stats` + every statistics-only method, each text scored by `mia_core.score`, (s) the same through
  `mia_core.score_texts` (the batch front door, which scores those methods while the next batch runs), host ms
  per text = ((b) − (c)) ÷ texts, (c) the bare batched forward of the same batches
  (pre-tokenised, full bf16 logits, nothing reduced), (d) the floor = 2 × matmul parameters × fed
  tokens ÷ the measured bf16 matmul rate, and the head's memory floor (float32 logits written and
  read once at the measured copy bandwidth).
- `correctness`: bf16 / float32 / float64 statistics on `demo`; batched vs one-at-a-time in bf16 and
  float32; a budget that does not fit (memory capped) halves and gives the same numbers as a run at
  the budget it ended on; AUROC of every method on demo-wiki with demo-known in bf16 and float32.
- `heavy`: Infilling fast vs the per-position reference (1B, N = 256, m = 5), GDS batched vs loop
  (demo), neighbours (self-proposed) per text.

    python3 bench/gpu.py [--parts throughput,correctness,heavy] [--out DIR] [--smoke]

`--smoke` runs everything tiny on any device (CPU included), to check the script itself.
Last line: `ratio=<(b) ÷ (c) on llama-1b, WikiMIA-like>`.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from sklearn.metrics import roc_auc_score
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import authors_loop  # noqa: E402  (bench/ is on sys.path when run as a script)
from envelope import load as load_average, write_result  # noqa: E402

import mia_core  # noqa: E402
from mia_core import metrics  # noqa: E402
from mia_core.fitting import FitSplit, fit_supervised  # noqa: E402
from mia_core.inputs.demo_sources import first_words, play_files, play_text, wiki_paragraphs  # noqa: E402
from mia_core.methods.gds.features import GdsSettings, features_loop, gradient_features  # noqa: E402
from mia_core.methods.infilling.engine import fed_ids, plan_branches, primed_fast, primed_reference  # noqa: E402
from mia_core.model import devices, forward, pipeline  # noqa: E402
from mia_core.model.forward import Segment, pack_batches, pad_right  # noqa: E402
from mia_core.model.language_model import LanguageModel  # noqa: E402
from mia_core.model.stats_cache import StatsCache  # noqa: E402

STATS_ONLY = ["loss", "zlib", "min_k", "min_k_pp", "dc_pdd"]
SIZES = {  # name: (hidden, layers, intermediate, heads, kv heads, vocab)
    "llama-1b": (2048, 16, 8192, 32, 8, 128256),
    "llama-7b": (4096, 32, 11008, 32, 32, 32000),
    "llama-135m": (576, 30, 1536, 9, 3, 49152),  # demo's shape (SmolLM2-135M), random weights: no model file to carry
}
SMOKE_SIZES = {"llama-1b": (64, 2, 128, 4, 2, 1000), "llama-7b": (96, 2, 192, 4, 4, 700),
               "llama-135m": (48, 2, 96, 4, 2, 900)}


def log(*parts) -> None:
    print(*parts, flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device):
    """(seconds, result) with the device synchronised on both sides."""
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return time.perf_counter() - start, result


def peak_reset(device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device) -> float:
    return torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else float("nan")


# ---------------------------------------------------------------- machine ceilings

def ceilings(device: torch.device, smoke: bool) -> dict:
    """Measured bf16 matmul rate (TFLOP/s) and device-to-device copy bandwidth (GB/s, read + write)."""
    if device.type != "cuda":
        return {"matmul_tflops": float("nan"), "copy_gbs": float("nan")}
    n = 2048 if smoke else 8192
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    times = []
    for _ in range(10):
        t, _ = timed(lambda: a @ b, device)
        times.append(t)
    tflops = 2 * n**3 / float(np.median(times)) / 1e12
    x = torch.randn(1 << 28, device=device, dtype=torch.float32)  # 1 GiB
    y = torch.empty_like(x)
    y.copy_(x)
    times = []
    for _ in range(10):
        t, _ = timed(lambda: y.copy_(x), device)
        times.append(t)
    copy = 2 * x.numel() * 4 / float(np.median(times)) / 1e9
    del a, b, x, y
    torch.cuda.empty_cache()
    return {"matmul_tflops": tflops, "copy_gbs": copy}


# ---------------------------------------------------------------- workloads

def wiki_like(n: int, seed: int = 0) -> list[str]:
    """WikiMIA-like: lead paragraphs of ≥ 32 words cut to a random 32–256 words (seeded)."""
    rng = random.Random(seed)
    paragraphs = [p for p in wiki_paragraphs().values() if len(p.split()) >= 32]
    rng.shuffle(paragraphs)
    return [first_words(p, rng.randint(32, 256)) for p in paragraphs[:n]]


def book_like(n: int, words: int = 512) -> list[str]:
    """BookMIA-like: consecutive 512-word snippets of the plays, round-robin over plays."""
    per_play = []
    for play in play_files():
        tokens = play_text(play)[1].split()
        per_play.append([" ".join(tokens[i : i + words]) for i in range(0, len(tokens) - words + 1, words)])
    out = []
    while len(out) < n and any(per_play):
        for snippets in per_play:
            if snippets and len(out) < n:
                out.append(snippets.pop(0))
    return out


# ---------------------------------------------------------------- models

def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE of `vocab_size` tokens trained on the texts, `<|endoftext|>` as its boundary."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")


@functools.lru_cache(maxsize=1)
def bench_tokenizer(smoke: bool):
    """The random models' tokenizer: a byte-level BPE of 32,000 tokens (the 7B's vocabulary; the 1B's logits are wider)."""
    corpus = list(wiki_paragraphs().values())[:6000] + book_like(400, 512)
    return train_tokenizer(corpus, SMOKE_SIZES["llama-7b"][-1] if smoke else SIZES["llama-7b"][-1])


def random_llama(name: str, tokenizer, device, dtype, smoke: bool, cache: StatsCache) -> LanguageModel:
    """A randomly initialised Llama-architecture model of the named size, built on the device."""
    hidden, layers, inter, heads, kv, vocab = (SMOKE_SIZES if smoke else SIZES)[name]
    config = LlamaConfig(vocab_size=max(vocab, len(tokenizer)), hidden_size=hidden, num_hidden_layers=layers,
                         intermediate_size=inter, num_attention_heads=heads, num_key_value_heads=kv,
                         max_position_embeddings=4096, tie_word_embeddings=False)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return LanguageModel(model.eval(), tokenizer, name=name, fingerprint=f"random-{name}-{vocab}", stats_cache=cache)


def matmul_params(lm: LanguageModel) -> int:
    """Parameters that take part in matrix products per token: every weight except the input embedding."""
    embed = lm.model.get_input_embeddings().weight
    return sum(p.numel() for p in lm.model.parameters() if p is not embed and p.dim() >= 2)


# ---------------------------------------------------------------- arms

def ours(lm: LanguageModel, texts: list[str], freq, budget: int):
    """(b) statistics (no cache) + every statistics-only method."""
    stats = lm.token_stats(texts, cache=False, batch_tokens=budget)
    return {m: [mia_core.score(m, s, **({"freq": freq} if m == "dc_pdd" else {})).value for s in stats]
            for m in STATS_ONLY}


def front_door(lm: LanguageModel, texts: list[str], freq):
    """(s) `score_texts` with the five statistics-only methods (scored as statistics arrive where the tree streams)."""
    return mia_core.score_texts(lm, texts, STATS_ONLY, freq=freq)


def bare_batches(lm: LanguageModel, texts: list[str], budget: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The padded batches our path forms (same segments, same packing), on the device."""
    segments = [Segment(i, lm._with_boundary(ids, "auto"), 1) for i, (ids, _) in enumerate(lm._encode_many(texts))]
    out = []
    for batch in pack_batches(segments, budget):
        ids, mask = pad_right([segments[i].ids for i in batch])
        out.append((ids.to(lm.device), mask.to(lm.device)))
    return out


@torch.inference_mode()
def bare_forward(lm: LanguageModel, batches) -> None:
    """(c) the model's own forward (full bf16 logits, nothing reduced) over those batches."""
    for ids, mask in batches:
        lm.model(input_ids=ids, attention_mask=mask, use_cache=False).logits


def throughput_case(lm: LanguageModel, texts: list[str], rates: dict, args) -> dict:
    """Arms (a)–(d) on one model and workload."""
    device = lm.device
    budget = lm.auto_batch_tokens()
    fed = [len(ids) + 1 for ids, _ in lm._encode_many(texts)]
    n_tokens = sum(fed)
    freq = mia_core.build_frequency_table(lm.tokenizer, texts, vocab_size=lm.vocab_width)
    warm = texts[: min(8, len(texts))]
    ours(lm, warm, freq, budget)
    authors_loop(lm, warm[:2])
    t_tok, batches = timed(lambda: bare_batches(lm, texts, budget), device)
    bare_forward(lm, batches[-1:])
    row: dict = {"texts": len(texts), "tokens": n_tokens, "budget_tokens": budget, "batches": len(batches),
                 "padded_tokens": int(sum(ids.numel() for ids, _ in batches)), "tokenise_s": t_tok}
    t_b = t_c = t_s = float("inf")
    keep = lm.stats_cache
    lm.stats_cache = StatsCache(keep.root, max_bytes=0)  # (s) reads the cache (a miss) and keeps nothing
    for _ in range(args.repeats):  # alternate, keep the fastest of each
        peak_reset(device)
        t, _ = timed(lambda: bare_forward(lm, batches), device)
        t_c, row["peak_gib_c"] = min(t_c, t), peak_gib(device)
        peak_reset(device)
        t, scores = timed(lambda: ours(lm, texts, freq, budget), device)
        t_b, row["peak_gib_b"] = min(t_b, t), peak_gib(device)
        t, front = timed(lambda: front_door(lm, texts, freq), device)
        t_s = min(t_s, t)
    lm.stats_cache = keep
    row["max_score_diff_b_s"] = float(max(np.max(np.abs(np.asarray(scores[m]) - front[m].to_numpy())) for m in STATS_ONLY))
    del batches
    row.update({"tok_s_a": float("nan"), "peak_gib_a": float("nan"), "b_over_a": float("nan")})
    if args.loop_stride > 0:  # the authors' loop on every n-th text (0: skipped)
        loop_texts = texts[:: args.loop_stride]
        loop_tokens = sum(fed[:: args.loop_stride])
        peak_reset(device)
        t_a, ref = timed(lambda: authors_loop(lm, loop_texts), device)
        row["peak_gib_a"] = peak_gib(device)
        idx = list(range(0, len(texts), args.loop_stride))
        row["max_score_diff_a_b"] = {m: float(np.max(np.abs(np.asarray(scores[m])[idx] - np.asarray(ref[m]))))
                                     for m in ref}
        row.update({"loop_texts": len(loop_texts), "loop_tokens": loop_tokens, "seconds_a_subset": t_a,
                    "tok_s_a": loop_tokens / t_a})
    params = matmul_params(lm)
    floor = 2 * params * n_tokens / (rates["matmul_tflops"] * 1e12)
    head_bytes = n_tokens * lm.vocab_width * 8  # float32 logits written once and read once
    row.update({
        "matmul_params": params, "tok_s_b": n_tokens / t_b, "tok_s_s": n_tokens / t_s, "tok_s_c": n_tokens / t_c,
        "tok_s_floor": n_tokens / floor, "seconds_b": t_b, "seconds_s": t_s, "seconds_c": t_c, "floor_s": floor,
        "head_memory_floor_s": head_bytes / (rates["copy_gbs"] * 1e9),
        "host_ms_per_text": 1e3 * (t_b - t_c) / len(texts),
    })
    if args.loop_stride > 0:
        row["b_over_a"] = row["tok_s_b"] / row["tok_s_a"]
    row["b_over_c_time"] = t_b / t_c
    row["s_over_c_time"] = t_s / t_c
    row["c_over_floor_time"] = t_c / floor
    return row


def part_throughput(args, device, rates, tmp: Path) -> dict:
    """Every model × workload: arms (a)–(d)."""
    n_wiki, n_book = (40, 12) if args.smoke else (args.wiki_texts, args.book_texts)
    workloads = {"wikimia-like": wiki_like(n_wiki), "bookmia-like": book_like(n_book, 64 if args.smoke else 512)}
    results: dict = {}
    for name in args.models:
        cache = StatsCache(tmp / f"stats-{name}")
        if name == "demo":
            lm = mia_core.load_model("demo", device=str(device), dtype=args.dtype)
        else:
            lm = random_llama(name, bench_tokenizer(args.smoke), device, torch.bfloat16, args.smoke, cache)
        log(f"\n{name}: {lm.dtype}, vocab {lm.vocab_width}, {matmul_params(lm) / 1e9:.3f} B matmul parameters, "
            f"batch budget {lm.auto_batch_tokens()} tokens")
        for workload, texts in workloads.items():
            row = throughput_case(lm, texts, rates, args)
            results[f"{name}/{workload}"] = row
            log(f"  {workload:13s} {row['texts']} texts, {row['tokens']} tokens | tok/s a {row['tok_s_a']:9.0f}  "
                f"b {row['tok_s_b']:9.0f}  s {row['tok_s_s']:9.0f}  c {row['tok_s_c']:9.0f}  floor {row['tok_s_floor']:9.0f} | b/a "
                f"{row['b_over_a']:5.1f}x  b÷c {row['b_over_c_time']:.3f}  s÷c {row['s_over_c_time']:.3f}  "
                f"c÷floor {row['c_over_floor_time']:.2f} | host ms/text {row['host_ms_per_text']:.3f} | "
                f"peak GiB a {row['peak_gib_a']:.1f} b {row['peak_gib_b']:.1f} c {row['peak_gib_c']:.1f}")
        del lm
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return results


# ---------------------------------------------------------------- correctness

def stat_diff(a, b) -> dict[str, float]:
    """Max |Δ| of logprob, μ, σ between two lists of statistics of the same texts."""
    return {f: float(max(np.max(np.abs(getattr(x, f).astype(np.float64) - getattr(y, f).astype(np.float64)),
                                initial=0.0) for x, y in zip(a, b))) for f in ("logprob", "mu", "sigma")}


def part_correctness(args, device, tmp: Path) -> dict:
    """Precision, batching, OOM halving and AUROC agreement on the demo models."""
    out: dict = {}
    texts = wiki_like(24 if args.smoke else 200, seed=1)
    by_dtype = {}
    for dtype in ("bfloat16", "float32", "float64"):
        lm = mia_core.load_model("demo", device=str(device), dtype=dtype)
        by_dtype[dtype] = lm.token_stats(texts, cache=False)
        if dtype != "float64":
            one = lm.token_stats(texts, cache=False, batch_tokens=1)  # every text alone
            out[f"batched_vs_one_at_a_time/{dtype}"] = stat_diff(by_dtype[dtype], one)
            forward.USE_FUSED_REDUCTION = False
            plain = lm.token_stats(texts, cache=False)
            forward.USE_FUSED_REDUCTION = True
            out[f"fused_vs_torch_reduction/{dtype}"] = stat_diff(by_dtype[dtype], plain)
            taken, pipeline.takes_device_mask = pipeline.takes_device_mask, lambda model: False
            transformers_mask = lm.token_stats(texts, cache=False)  # padded batches with the 2-D mask
            pipeline.takes_device_mask = taken
            out[f"device_mask_vs_2d_mask/{dtype}"] = stat_diff(by_dtype[dtype], transformers_mask)  # 0 expected
        del lm
    out["bf16_vs_float64"] = stat_diff(by_dtype["bfloat16"], by_dtype["float64"])
    out["float32_vs_float64"] = stat_diff(by_dtype["float32"], by_dtype["float64"])
    log(f"\nstatistics on demo, {len(texts)} WikiMIA-like texts, max |Δ| (logprob, mu, sigma):")
    for key, value in out.items():
        log(f"  {key:42s} " + "  ".join(f"{k} {v:.2e}" for k, v in value.items()))
    if device.type == "cuda":
        out["oom_halving"] = oom_halving(device, texts, args.smoke)
        log(f"  OOM halving: {out['oom_halving']}")
    return out


def oom_halving(device, texts: list[str], smoke: bool) -> dict:
    """Cap the process's GPU memory, ask for a budget far too big, and compare with a run at the budget it ended on."""
    lm = mia_core.load_model("demo", device=str(device), dtype="bfloat16")
    long_texts = book_like(64 if smoke else 400, 512)
    free, total = torch.cuda.mem_get_info(device)
    used = torch.cuda.memory_allocated(device)
    torch.cuda.set_per_process_memory_fraction(min(1.0, (used + (2 << 30)) / total), device.index or 0)  # 2 GiB of headroom
    try:
        asked = 1 << 20
        halved = lm.token_stats(long_texts, cache=False, batch_tokens=asked)
        ended = lm.last_batch_tokens
        again = lm.token_stats(long_texts, cache=False, batch_tokens=ended)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, device.index or 0)
    diff = stat_diff(halved, again)
    return {"asked": asked, "ended_on": ended, "identical": all(v == 0.0 for v in diff.values()), "max_diff": diff}


def auroc_agreement(args, device, tmp: Path) -> dict:
    """AUROC of every method on demo-wiki with demo-known, in bf16 and float32 (difference target ≤ 0.005)."""

    frame = mia_core.inputs.datasets.load("demo-wiki")
    if args.smoke:
        frame = frame.groupby("label").head(24).reset_index(drop=True)
    texts, labels = frame["text"].tolist(), frame["label"].to_numpy()
    held = {t[:60] for t in texts}  # demo-wiki texts are cut from paragraphs: keep their sources out of the corpus
    corpus = [p for p in wiki_paragraphs().values() if p[:60] not in held][: 200 if args.smoke else 3000]
    result: dict = {}
    for dtype in ("bfloat16", "float32"):
        lm = mia_core.load_model("demo-known", device=str(device), dtype=dtype)
        ref = mia_core.load_model("demo", device=str(device), dtype=dtype)
        freq = mia_core.build_frequency_table(lm.tokenizer, corpus, vocab_size=lm.vocab_width)
        aurocs, seconds = {}, {}
        plan = [(m, {}) for m in STATS_ONLY] + [("lowercase", {}), ("ref", {"ref_model": ref}),
                                                ("infilling", {}), ("neighbor", {"n_neighbors": 5 if args.smoke else 25})]
        for method, params in plan:
            if method == "dc_pdd":
                params = {"freq": freq}
            t, frame_scores = timed(lambda: mia_core.score_texts(lm, texts, [method], **params), device)
            aurocs[method], seconds[method] = float(roc_auc_score(labels, frame_scores[method].to_numpy())), t
        t, gds = timed(lambda: fit_supervised(lm, "gds", texts, labels, split=FitSplit(), score_all=True), device)
        held = np.asarray(labels)[gds.test_idx]
        aurocs["gds (held-out 70%)"], seconds["gds (held-out 70%)"] = metrics.auroc(held, gds.scores[gds.test_idx]), t
        result[dtype] = {"auroc": aurocs, "seconds": seconds}
        del lm, ref
    diffs = {m: abs(result["bfloat16"]["auroc"][m] - result["float32"]["auroc"][m]) for m in result["float32"]["auroc"]}
    result["abs_diff"] = diffs
    log(f"\nAUROC on demo-wiki ({len(texts)} texts) with demo-known: method  bf16  float32  |Δ|  (seconds bf16/fp32)")
    for m, d in diffs.items():
        log(f"  {m:20s} {result['bfloat16']['auroc'][m]:.4f}  {result['float32']['auroc'][m]:.4f}  {d:.4f}  "
            f"({result['bfloat16']['seconds'][m]:.1f} / {result['float32']['seconds'][m]:.1f} s)")
    return result


# ---------------------------------------------------------------- heavy methods

def part_heavy(args, device, tmp: Path) -> dict:
    """Infilling fast vs reference on the 1B model; GDS batched vs loop on demo; neighbours per text."""
    out: dict = {}
    lm = random_llama("llama-1b", bench_tokenizer(args.smoke), device, torch.bfloat16, args.smoke, StatsCache(tmp / "heavy"))
    n_tok = 32 if args.smoke else 256
    texts = [first_words(p, 400) for p in list(wiki_paragraphs().values()) if len(p.split()) >= 300][:2]
    ids = [lm.tokenizer(t)["input_ids"][: n_tok - 1] for t in texts]
    texts = [lm.tokenizer.decode(i) for i in ids]
    stats = lm.token_stats(texts, cache=False)
    plans = [(fed_ids(lm, s), plan_branches(s, fed_ids(lm, s), 5)) for s in stats]
    primed_fast(lm, *plans[0])
    t_fast, fast = timed(lambda: [primed_fast(lm, full, b) for full, b in plans], device)
    t_ref, ref = timed(lambda: [primed_reference(lm, full, b) for full, b in plans], device)
    diff = max(float(np.max(np.abs(f["logprob"] - r["logprob"]))) for f, r in zip(fast, ref))
    out["infilling"] = {"texts": len(texts), "scored": [s.n_scored for s in stats],
                        "branches": [len(b) for _, b in plans], "fast_s": t_fast, "reference_s": t_ref,
                        "ratio": t_ref / t_fast, "max_primed_logprob_diff_bf16": diff}
    log(f"\ninfilling, llama-1b bf16, {len(texts)} texts of {out['infilling']['scored']} tokens, m = 5, branches "
        f"{out['infilling']['branches']}: reference {t_ref:.2f} s, fast {t_fast:.2f} s, ratio {t_ref / t_fast:.1f}x "
        f"(primed log p max |Δ| {diff:.2e}: bf16 logits in the reference, float32 head in the fast path)")
    del lm
    demo = mia_core.load_model("demo", device=str(device), dtype="bfloat16")
    gtexts = wiki_like(16 if args.smoke else 128, seed=2)
    settings = GdsSettings()
    gradient_features(demo, gtexts[:2], settings)
    t_batched, batched = timed(lambda: gradient_features(demo, gtexts, settings), device)
    t_loop, loop = timed(lambda: features_loop(demo, gtexts, settings), device)
    rel = np.abs(batched - loop) / np.maximum(np.abs(loop), 1e-6)
    out["gds"] = {"texts": len(gtexts), "loop_s": t_loop, "batched_s": t_batched, "ratio": t_loop / t_batched,
                  "median_rel_diff": float(np.median(rel))}
    log(f"GDS features, demo bf16, {len(gtexts)} texts: loop {t_loop:.2f} s, batched {t_batched:.2f} s, ratio "
        f"{t_loop / t_batched:.1f}x (median rel. feature diff {np.median(rel):.1e})")
    ntexts = gtexts[:4 if args.smoke else 16]
    t_nb, _ = timed(lambda: mia_core.score_texts(demo, ntexts, ["neighbor"], n_neighbors=25), device)
    out["neighbor"] = {"texts": len(ntexts), "seconds": t_nb, "per_text_s": t_nb / len(ntexts)}
    log(f"neighbour (self-proposed, 25 per text), demo bf16: {t_nb / len(ntexts):.2f} s per text")
    return out


# ---------------------------------------------------------------- main

def versions(device) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "device": str(device)}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="throughput,correctness,auroc,heavy")
    parser.add_argument("--models", default="demo,llama-1b,llama-7b")
    parser.add_argument("--wiki-texts", type=int, default=2000)
    parser.add_argument("--book-texts", type=int, default=1000)
    parser.add_argument("--loop-stride", type=int, default=4, help="the authors' loop runs on every n-th text (0: not run)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--dtype", default="bfloat16", help="dtype of demo in the throughput part")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", default=os.environ.get("OUT", "bench-gpu-out"))
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--no-device-mask", action="store_true",
                        help="padded batches take transformers' 2-D mask (its check waits for the device), to compare")
    args = parser.parse_args()
    if args.no_device_mask:
        pipeline.takes_device_mask = lambda model: False
    args.models = args.models.split(",")
    device = devices.resolve_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = {**versions(device), "device_mask": not args.no_device_mask}
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if device.type == "cuda" else None
    load_before = load_average()
    rates = ceilings(device, args.smoke)
    info.update(rates)
    log(json.dumps(info))
    write_result(out / "environment.json", "gpu-environment", info, load_before=load_before, gpus=gpus)
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for part in args.parts.split(","):
            start, load_before = time.perf_counter(), load_average()
            fn = {"throughput": lambda: part_throughput(args, device, rates, Path(tmp)),
                  "correctness": lambda: part_correctness(args, device, Path(tmp)),
                  "auroc": lambda: auroc_agreement(args, device, Path(tmp)),
                  "heavy": lambda: part_heavy(args, device, Path(tmp))}[part]
            result = fn()
            write_result(out / f"{part}.json", f"gpu-{part}", result, load_before=load_before, gpus=gpus,
                         environment=versions(device))
            log(f"[{part}: {time.perf_counter() - start:.0f} s]")
            summary[part] = result
    key = "llama-1b/wikimia-like"
    if key in summary.get("throughput", {}):
        log(f"ratio={summary['throughput'][key]['b_over_c_time']:.3f}")


if __name__ == "__main__":
    main()

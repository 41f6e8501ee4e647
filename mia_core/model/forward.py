"""Batched forward passes that reduce logits to `TokenStats` arrays without keeping full logits.

Texts become *segments* (one per context window); segments are length-sorted and packed into
batches under a token budget, right-padded with an attention mask. Where the output head is a
plain linear layer on the backbone's last hidden state, logits are computed only for scored
positions, a chunk of rows at a time, so no (batch, T, vocab) tensor ever exists; otherwise the
model's own logits are reduced chunk-wise.
"""
from __future__ import annotations

import itertools
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .fused_stats import fused_available, fused_reduce
from .placement import is_offloaded, onloaded
from .reduce import reduce_logits, stats_dtype

#: Architectures whose logits are exactly `lm_head(last_hidden_state)` (no soft-capping or scaling).
PLAIN_HEAD_TYPES = frozenset(
    {"llama", "mistral", "qwen2", "qwen3", "gpt2", "gpt_neox", "gptj", "gpt_neo", "opt", "phi",
     "phi3", "olmo", "olmo2", "smollm3", "stablelm", "starcoder2", "falcon", "bloom"}
)
#: Rows of logits computed per head matmul: the head's weight (vocab × hidden) is streamed once per
#: chunk, so chunks must be large; the scratch is bounded by rows × vocab × 4 bytes (100 MB at 49k).
HEAD_CHUNK_ROWS = 512
#: Rows reduced at once on the CPU: as many as fit `REDUCE_CHUNK_ELEMENTS` float32 logits (2 MiB: the reduction's
#: temporaries stay in the CPU's cache, and a narrow vocabulary is not reduced a few rows per call), at least this
#: many. At 64 (before) a 49k vocabulary's chunk was 12 MiB a temporary; bench/reduce_rows.py measured the reduction
#: at 0.74–1.00 of that time at 49,152 and 0.82 at 128,256 (docs/performance.md).
REDUCE_CHUNK_ROWS = 8
#: Elsewhere (CUDA without the fused kernel, float64, MPS): at least this many rows, a quarter of the block per call.
DEVICE_REDUCE_CHUNK_ROWS = 64
REDUCE_CHUNK_ELEMENTS = 1 << 19
#: The statistics a batch yields: floating-point ones (float32; float64 for float64 models), then the integer ones.
FLOAT_STATS = ("logprob", "mu", "sigma", "top1_logprob", "entropy")
INT_STATS = ("top1_id", "rank")
#: All of them, in the order of the rows `batch_stats` returns.
STATS_NAMES = (*FLOAT_STATS, *INT_STATS)
#: On CUDA, float32 logits per head chunk (1 GiB of scratch): big matmuls, few launches.
CUDA_HEAD_CHUNK_ELEMENTS = 1 << 28
#: A batch that holds a quarter of its budget takes no text shorter than this share of its width
#: (padded / real tokens on 2,000 WikiMIA-like texts at a 131,072-token budget: 1.49 → 1.16).
PACK_MIN_FILL = 0.8
#: … but a batch smaller than this is never split for padding: per-batch overhead would cost more.
PACK_MIN_SPLIT_TOKENS = 1024
#: Use the fused one-pass Triton reduction where it is available (benches switch it off to compare).
USE_FUSED_REDUCTION = True



@dataclass(frozen=True)
class Segment:
    """One model input: `ids` are fed, tokens `ids[score_from:]` are scored (a list, or for the windows of a long
    text a view of its int64 array)."""

    owner: int
    ids: list[int] | np.ndarray
    score_from: int


def split_windows(n_tokens: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """Sliding windows (start, end, score_from) covering tokens 1..n-1 exactly once.

    The first window scores its tokens 1..context-1; each later window feeds exactly `context - stride`
    tokens of left context, then scores the next `stride` (or, in the last window, fewer) tokens. So
    every token sees at least `context - stride` tokens of context, and the last window is no longer
    than it needs to be (8,193 tokens at context 8,192: 8,192 + 4,097 fed, not two full windows).
    """
    if n_tokens <= context:
        return [(0, n_tokens, 1)]
    keep = context - stride  # the left context every later window guarantees (docs/methods.md "Long texts")
    windows, end = [(0, context, 1)], context
    while end < n_tokens:
        new_end = min(end + stride, n_tokens)
        windows.append((end - keep, new_end, keep))
        end = new_end
    return windows


def window_ids(ids: np.ndarray, boundary: int | None, lead: int, start: int, end: int) -> np.ndarray:
    """Fed ids [start, end) of a long text whose fed ids are `[boundary] * lead + ids`: a view of `ids` (no copy of a
    long text's ids per window), except in the window that starts with the boundary token."""
    if start >= lead:
        return ids[start - lead : end - lead]
    return np.concatenate((np.array([boundary], np.int64), ids[: end - lead]))


def plain_head(model: nn.Module) -> tuple[nn.Module, nn.Linear] | None:
    """(backbone, head) when logits = head(backbone(...).last_hidden_state), else None."""
    config = model.config
    if config.model_type not in PLAIN_HEAD_TYPES:
        return None
    if any(getattr(config, name, None) for name in ("final_logit_softcapping", "logit_scale", "logits_scaling")):
        return None
    head, backbone = model.get_output_embeddings(), model.base_model
    if not isinstance(head, nn.Linear) or backbone is model:
        return None
    return backbone, head


def stats_head(head: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The head's weight and bias in `stats_dtype` (a float32 copy, cached on the module, for half-precision models)."""
    if head.weight.dtype == stats_dtype(head.weight.dtype):
        return head.weight, head.bias
    if is_offloaded(head):  # a copy kept on the module would undo the offload: made per call instead
        return head.weight.float(), head.bias.float() if head.bias is not None else None
    cached = getattr(head, "_mia_float32", None)
    if cached is None or cached[0].device != head.weight.device:
        bias = head.bias.float() if head.bias is not None else None
        cached = (head.weight.float(), bias)
        head._mia_float32 = cached
    return cached


def head_chunk_rows(device: torch.device, vocab: int) -> int:
    """Rows of logits per head matmul: `HEAD_CHUNK_ROWS` on CPU, about 1 GiB of float32 logits on CUDA."""
    if device.type != "cuda":
        return HEAD_CHUNK_ROWS
    return max(HEAD_CHUNK_ROWS, min(16384, CUDA_HEAD_CHUNK_ELEMENTS // max(1, vocab)))


def head_logits(hidden: torch.Tensor, head: nn.Linear) -> torch.Tensor:
    """Logits of hidden rows (rows, H) under a linear head, in float32 at least (float64 for float64 models).

    bf16/fp16 weights on CUDA: one tensor-core matmul with float32 accumulation and float32 output
    (products of two bf16 numbers are exact in float32, so this is a float32 head without a float32
    copy of the weight); elsewhere the head's float32 copy (`stats_head`).
    """
    weight = head.weight
    if weight.is_cuda and weight.dtype in (torch.bfloat16, torch.float16) and _mm_out_dtype_works(weight.device):
        logits = torch.mm(hidden.to(weight.dtype), weight.t(), out_dtype=torch.float32)
        return logits if head.bias is None else logits.add_(head.bias.float())
    weight, bias = stats_head(head)
    return F.linear(hidden.to(weight.dtype), weight, bias)


_MM_OUT_DTYPE: dict[str, bool] = {}


def _mm_out_dtype_works(device: torch.device) -> bool:
    """Whether this torch build has `torch.mm(..., out_dtype=float32)` for half inputs on this device (asked once)."""
    key = str(device)
    if key not in _MM_OUT_DTYPE:
        probe = torch.ones((2, 2), dtype=torch.bfloat16, device=device)
        try:
            _MM_OUT_DTYPE[key] = torch.mm(probe, probe, out_dtype=torch.float32).dtype == torch.float32
        except (TypeError, RuntimeError, NotImplementedError):
            _MM_OUT_DTYPE[key] = False
    return _MM_OUT_DTYPE[key]


def reduce_rows(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """`reduce_logits` of a block of rows: the fused one-pass kernel on CUDA float32 logits, else chunk-wise."""
    if logits.dtype in (torch.bfloat16, torch.float16):
        logits = logits.float()
    if USE_FUSED_REDUCTION and logits.dtype == torch.float32 and fused_available(logits.device):
        return fused_reduce(logits, targets)
    if logits.device.type == "cpu":
        step = max(REDUCE_CHUNK_ROWS, REDUCE_CHUNK_ELEMENTS // max(1, logits.shape[1]))
    else:
        step = max(DEVICE_REDUCE_CHUNK_ROWS, logits.shape[0] // 4)
    parts: dict[str, list[torch.Tensor]] = {}
    for sub in range(0, logits.shape[0], step):
        for key, value in reduce_logits(logits[sub : sub + step], targets[sub : sub + step]).items():
            parts.setdefault(key, []).append(value)
    return {key: torch.cat(values) for key, values in parts.items()}


def pad_right(seqs: Sequence[Sequence[int]], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask) of sequences right-padded with `pad_id` to the longest, both (b, width) int64."""
    ids, mask = _padded(seqs, pad_id)
    return torch.from_numpy(ids), torch.from_numpy(mask.astype(np.int64))


def _padded(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids (b, width) int64, mask (b, width) bool) of right-padded sequences, filled in one scatter (no loop per row)."""
    lengths = np.fromiter(map(len, seqs), np.int64, len(seqs))  # (b,)
    width = int(lengths.max())
    mask = np.arange(width)[None, :] < lengths[:, None]  # (b, width)
    ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    if isinstance(seqs[0], np.ndarray):  # windows of a long text are views of its array (lists of others join too)
        ids[mask] = np.concatenate(seqs)
    else:
        ids[mask] = np.fromiter(itertools.chain.from_iterable(seqs), np.int64, int(lengths.sum()))
    return ids, mask


@dataclass(frozen=True)
class BatchArrays:
    """One padded batch on the host: what the model is fed and which positions are scored.

    ids, mask : (b, width) int64, right-padded. rows : (n,) flat (b·width) indices of the positions whose
    logits are reduced, segment by segment; targets : (n,) the true next token of each such position.
    counts : (b,) scored tokens per segment, to split the batch's statistics again.
    """

    ids: np.ndarray
    mask: np.ndarray
    rows: np.ndarray
    targets: np.ndarray
    counts: np.ndarray


def batch_arrays(segments: Sequence[Segment], pad_id: int = 0) -> BatchArrays:
    """The padded batch of these segments, built with array operations over the whole batch."""
    ids, mask = _padded([seg.ids for seg in segments], pad_id)
    lengths = mask.sum(axis=1)  # (b,)
    starts = np.fromiter((seg.score_from for seg in segments), np.int64, len(segments))  # (b,)
    cols = np.arange(ids.shape[1])[None, :]
    # the logits at position t-1 predict token t: positions score_from-1 … len-2 of each row
    scored = (cols >= starts[:, None] - 1) & (cols < lengths[:, None] - 1)  # (b, width)
    rows = np.flatnonzero(scored)
    return BatchArrays(ids, mask.astype(np.int64), rows, ids.reshape(-1)[rows + 1], scored.sum(axis=1))


def pack_batches(segments: list[Segment], batch_tokens: int) -> list[list[int]]:
    """Indices of segments packed longest-first into batches of ≤ batch_tokens padded tokens, with little padding."""
    return pack_lengths([len(s.ids) for s in segments], batch_tokens, min_fill=PACK_MIN_FILL)


def pack_lengths(lengths: Sequence[int], batch_tokens: int, *, min_fill: float = 0.0) -> list[list[int]]:
    """Indices of items of these lengths packed longest-first into batches of ≤ batch_tokens padded tokens
    (an item longer than the budget alone).

    min_fill : once a batch holds a quarter of the budget (and at least `PACK_MIN_SPLIT_TOKENS`), an item
        shorter than min_fill × the batch's width starts a new batch, so padding stays under 1 − min_fill
        of the batch (0: fill to the budget).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches:
            batch = batches[-1]
            width = lengths[batch[0]]  # longest in the batch: sorted descending
            big_enough = len(batch) * width >= max(batch_tokens // 4, PACK_MIN_SPLIT_TOKENS)
            if (len(batch) + 1) * width <= batch_tokens and not (big_enough and lengths[i] < min_fill * width):
                batch.append(i)
                continue
        batches.append([i])
    return batches


@torch.inference_mode()
def batch_stats(model: nn.Module, split, input_ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor,
                targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Reduce one padded batch to statistics of the selected rows (flattened (batch·T) indices), on the device the
    logits land on (the head's: the last one of a model sharded across devices, `mia_core.model.placement`).

    Returns (floats (len(FLOAT_STATS), rows), ints (len(INT_STATS), rows) int64): two tensors, so that the host
    fetches a batch's statistics in two copies, which it may start without waiting (nothing here synchronises).
    """
    if split is not None:
        backbone, head = split
        hidden = backbone(input_ids=input_ids, attention_mask=mask, use_cache=False)[0]  # (b, T, H)
        flat = hidden.reshape(-1, hidden.shape[-1])[rows.to(hidden.device)]  # (rows, H), where the backbone ended
        # the head runs in float32 even for bf16/fp16 models: bf16 logits are too coarse for log-probs
        logits_of = lambda sl: head_logits(flat[sl].to(head.weight.device), head)  # noqa: E731  (rows, vocab)
        vocab = head.weight.shape[0]
    else:  # a dispatched model's own call brings its logits back to the inputs' device
        head = None
        logits = model(input_ids=input_ids, attention_mask=mask, use_cache=False).logits  # (b, T, V)
        flat = logits.reshape(-1, logits.shape[-1])
        logits_of = lambda sl: flat[rows[sl]]  # noqa: E731
        vocab = logits.shape[-1]
    parts: dict[str, list[torch.Tensor]] = {}
    with onloaded(head) if head is not None else nullcontext():  # an offloaded head's weights, once per batch
        step = head_chunk_rows(head.weight.device if head is not None else input_ids.device, vocab)
        for begin in range(0, rows.shape[0], step):
            logits = logits_of(slice(begin, begin + step))  # (≤ step, vocab)
            for key, value in reduce_rows(logits, targets[begin : begin + step].to(logits.device)).items():
                parts.setdefault(key, []).append(value)
    if not parts:  # a batch with nothing to score (one-token texts)
        float_dtype = stats_dtype(next(model.parameters()).dtype)
        return (torch.empty((len(FLOAT_STATS), 0), dtype=float_dtype, device=input_ids.device),
                torch.empty((len(INT_STATS), 0), dtype=torch.int64, device=input_ids.device))
    joined = {k: torch.cat(v) for k, v in parts.items()}
    return torch.stack([joined[k] for k in FLOAT_STATS]), torch.stack([joined[k] for k in INT_STATS])

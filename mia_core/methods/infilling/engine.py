"""Infilling Score engine (Raoof et al., "Infilling Score", Eq. 10; docs/methods.md "infilling").

For each scored position i whose true token x_i is not the model's top-1 guess x_i*, the text is
re-read with x_i replaced by x_i* and the next m tokens are scored again ("primed" statistics).
Two implementations of the same numbers:

- `primed_reference`: one full-length forward of the substituted sequence per position, the
  authors' algorithm (O(N²) tokens); kept as the test oracle.
- `primed_fast`: one forward of the shared prefix with a KV cache, then every substituted branch
  (m tokens each, at its own position ids) evaluated against that cache in chunks, a 4-D mask
  letting branch b see the prefix before its position and its own earlier tokens (O(N·m) tokens).

Positions with x_i == x_i* score exactly 0 and get no branch in either implementation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from transformers.cache_utils import DynamicLayer

from ...model.forward import head_chunk_rows, head_logits, plain_head, reduce_rows
from ...model.language_model import LanguageModel
from ...api import TokenStats
from ...model.reduce import reduce_logits
from .settings import NORMALIZATIONS

IMPLEMENTATIONS = ("auto", "fast", "reference")
SIGMA_FLOOR = 1e-12
#: Architectures whose attention takes a custom 4-D additive mask and explicit position ids with a
#: plain KV cache, tested against the reference (tests/methods/test_infilling.py); others use the reference.
FAST_MODEL_TYPES = frozenset({"llama", "qwen2", "gpt2", "gpt_neox"})
FAST_ATTENTION = frozenset({"sdpa", "eager"})
#: Branch tokens per forward: bounds the (chunk, prefix + chunk) mask and the activations.
CHUNK_TOKENS = {"cpu": 1024, "cuda": 4096}


@dataclass(frozen=True)
class Branch:
    """The substituted branch of scored position `index`: `tokens` fed at positions start…, predicting `targets`."""

    index: int
    start: int
    tokens: list[int]
    targets: list[int]


def default_m(n_scored: int) -> int:
    """docs/methods.md: m = 1 future token for texts of ≤ 32 scored tokens, else 5."""
    return 1 if n_scored <= 32 else 5


def fed_ids(lm: LanguageModel, stats: TokenStats) -> list[int]:
    """The token ids the statistics pass fed (boundary + text, cut to the context if truncated).

    Scored token s sits at position s + 1. Texts scored in sliding windows are refused: a branch
    needs the one context in which its position was scored.
    """
    if stats.long_text == "sliding":
        raise ValueError(
            f"infilling needs the text in one context window, but it has {stats.n_text_tokens} tokens "
            f"(context {lm.max_length}) and was scored in sliding windows; score it with "
            "long_text='truncate' (only the first context is scored) or split the text")
    full = lm._with_boundary(lm._encode(stats.text)[0], stats.bos_policy)
    if stats.long_text == "truncated":
        full = full[: lm.max_length]
    if len(full) != stats.n_scored + 1 or not np.array_equal(full[1:], stats.token_ids):
        raise ValueError("the statistics do not match this model's tokenisation of the text (another model?)")
    return full


def plan_branches(stats: TokenStats, full: list[int], m: int) -> list[Branch]:
    """One branch per position whose true token is not the top-1 and that has a future token."""
    n = stats.n_scored
    branches = []
    for i in np.flatnonzero(stats.token_ids != stats.top1_id).tolist():
        span = min(m, n - 1 - i)  # future tokens j = i+1 … i+span (the last token may be one)
        if span > 0:
            t = i + 1
            tokens = [int(stats.top1_id[i])] + full[t + 1 : t + span]
            branches.append(Branch(i, t, tokens, full[t + 1 : t + span + 1]))
    return branches


def combine(stats: TokenStats, branches: list[Branch], primed: dict[str, np.ndarray],
            normalization: str) -> np.ndarray:
    """Per-token r_i (float64) from the original statistics and the branches' primed ones.

    position: r_i = (lp_i − lp*_i)/σ_i + Σ_j [(lp_j − μ_j)/σ_j − (lp'_j − μ'_j)/σ'_j];
    anchor:   every future term normalised by position i's μ_i, σ_i (Algorithm 1; μ_i cancels).
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS} (got {normalization!r})")
    lp, mu = stats.logprob.astype(np.float64), stats.mu.astype(np.float64)
    sigma = np.maximum(stats.sigma.astype(np.float64), SIGMA_FLOOR)
    lp_p, mu_p = primed["logprob"].astype(np.float64), primed["mu"].astype(np.float64)
    sigma_p = np.maximum(primed["sigma"].astype(np.float64), SIGMA_FLOOR)
    is_top1 = stats.token_ids == stats.top1_id
    r = np.where(is_top1, 0.0, (lp - stats.top1_logprob.astype(np.float64)) / sigma)
    row = 0
    for b in branches:
        i, span = b.index, len(b.targets)
        j = slice(i + 1, i + 1 + span)
        rows = slice(row, row + span)
        if normalization == "position":
            r[i] += np.sum((lp[j] - mu[j]) / sigma[j] - (lp_p[rows] - mu_p[rows]) / sigma_p[rows])
        else:
            r[i] += np.sum(lp[j] - lp_p[rows]) / sigma[i]
        row += span
    return r


def fast_supported(model) -> bool:
    """Whether `primed_fast` is known to be exact for this model (architecture and attention kernel)."""
    config = model.config
    full_attention = all(kind == "full_attention" for kind in getattr(config, "layer_types", None) or ())
    return (config.model_type in FAST_MODEL_TYPES and config._attn_implementation in FAST_ATTENTION
            and full_attention and not getattr(config, "sliding_window", None))


@torch.inference_mode()
def primed_reference(lm: LanguageModel, full: list[int], branches: list[Branch]) -> dict[str, np.ndarray]:
    """Primed statistics from one full-length forward of each substituted sequence (the authors' loop)."""
    parts: dict[str, list[torch.Tensor]] = {}
    for b in branches:
        seq = list(full)
        seq[b.start] = b.tokens[0]
        logits = lm.model(input_ids=torch.tensor([seq], device=lm.device), use_cache=False).logits[0]  # (L, V)
        rows = slice(b.start, b.start + len(b.targets))  # output at position p predicts token p + 1
        _append(parts, reduce_logits(logits[rows], torch.tensor(b.targets, device=lm.device)))
    return _concat(parts)


@torch.inference_mode()
def primed_fast(lm: LanguageModel, full: list[int], branches: list[Branch], *,
                chunk_tokens: int | None = None) -> dict[str, np.ndarray]:
    """Primed statistics of every branch against one KV cache of the shared prefix."""
    if not branches:
        return _concat({})
    model, device = lm.model, lm.device
    split = plain_head(model)
    body = split[0] if split is not None else model
    prefix = max(b.start for b in branches)  # branch b attends to full[:b.start]
    cache = body(input_ids=torch.tensor([full[:prefix]], device=device), use_cache=True).past_key_values
    if not all(type(layer) is DynamicLayer for layer in cache.layers):
        raise ValueError(f"the fast infilling path needs a plain KV cache ({type(model).__name__} has another kind)")
    budget = chunk_tokens or CHUNK_TOKENS.get(device.type, CHUNK_TOKENS["cuda"])
    parts: dict[str, list[torch.Tensor]] = {}
    for chunk in _chunks(branches, budget):
        ids, positions, mask, targets = _chunk_inputs(chunk, prefix, lm.dtype, device)
        out = body(input_ids=ids, position_ids=positions, attention_mask=mask, past_key_values=cache, use_cache=True)
        cache.crop(-ids.shape[1])  # back to the shared prefix for the next chunk
        if split is not None:
            hidden = out[0][0]  # (q, H)
            logits_of = lambda sl: head_logits(hidden[sl], split[1])  # noqa: E731
        else:
            logits_of = lambda sl: out.logits[0, sl]  # noqa: E731
        step = head_chunk_rows(device, lm.vocab_width)
        for begin in range(0, ids.shape[1], step):
            _append(parts, reduce_rows(logits_of(slice(begin, begin + step)), targets[begin : begin + step]))
    return _concat(parts)


def _chunks(branches: list[Branch], budget: int) -> list[list[Branch]]:
    """Consecutive branches grouped into chunks of at most `budget` tokens (a longer branch alone)."""
    chunks: list[list[Branch]] = [[]]
    size = 0
    for b in branches:
        if chunks[-1] and size + len(b.tokens) > budget:
            chunks.append([])
            size = 0
        chunks[-1].append(b)
        size += len(b.tokens)
    return chunks


def _chunk_inputs(chunk: list[Branch], prefix: int, dtype: torch.dtype, device: torch.device):
    """input ids, position ids (1, q), additive 4-D mask (1, 1, q, prefix + q) and targets (q,) of a chunk."""
    ids = [tok for b in chunk for tok in b.tokens]
    positions = [b.start + k for b in chunk for k in range(len(b.tokens))]
    owner = torch.tensor([n for n, b in enumerate(chunk) for _ in b.tokens])  # (q,) branch of each token
    start = torch.tensor([b.start for b in chunk for _ in b.tokens])  # (q,)
    q = len(ids)
    sees_prefix = torch.arange(prefix)[None, :] < start[:, None]  # (q, prefix): full[:start]
    idx = torch.arange(q)
    sees_branch = (owner[None, :] == owner[:, None]) & (idx[None, :] <= idx[:, None])  # (q, q): causal, own branch
    allowed = torch.cat([sees_prefix, sees_branch], dim=1)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    targets = torch.tensor([tok for b in chunk for tok in b.targets], device=device)
    return (torch.tensor([ids], device=device), torch.tensor([positions], device=device),
            mask[None, None].to(device), targets)


def _append(parts: dict[str, list[torch.Tensor]], stats: dict[str, torch.Tensor]) -> None:
    for key in ("logprob", "mu", "sigma"):
        parts.setdefault(key, []).append(stats[key])


def _concat(parts: dict[str, list[torch.Tensor]]) -> dict[str, np.ndarray]:
    return {key: torch.cat(parts[key]).cpu().numpy() if parts.get(key) else np.empty(0, np.float32)
            for key in ("logprob", "mu", "sigma")}


def infilling_token_scores(lm: LanguageModel, stats: TokenStats, *, m: int | None = None, normalization: str = "position",
                           implementation: str = "auto", chunk_tokens: int | None = None) -> tuple[np.ndarray, dict]:
    """Per-token Infilling Scores r_i (n_scored,) and facts for display (m, branches, implementation).

    implementation : "fast" (KV-cache branches), "reference" (one full pass per position), or
        "auto" (fast where `fast_supported`, else reference).
    """
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"implementation must be one of {IMPLEMENTATIONS} (got {implementation!r})")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS} (got {normalization!r})")
    if m is not None and (isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1):
        raise ValueError(f"m must be a positive integer (got {m!r})")
    m = default_m(stats.n_scored) if m is None else int(m)
    full = fed_ids(lm, stats)
    branches = plan_branches(stats, full, m)
    if implementation == "auto":
        implementation = "fast" if fast_supported(lm.model) else "reference"
    elif implementation == "fast" and not fast_supported(lm.model):
        config = lm.model.config
        raise ValueError(f"the fast infilling path is not validated for {config.model_type!r} with "
                         f"{config._attn_implementation!r} attention; use implementation='reference'")
    if implementation == "fast":
        primed = primed_fast(lm, full, branches, chunk_tokens=chunk_tokens)
    else:
        primed = primed_reference(lm, full, branches)
    facts = {"m": m, "normalization": normalization, "substituted positions": len(branches),
             "implementation": implementation}
    return combine(stats, branches, primed, normalization), facts

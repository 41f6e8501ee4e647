"""Logits of suffix positions → what p_z needs: the true token's log-probability under top-k sampling, and its rank.

Top-k sampling at temperature T draws from q(v) = softmax(z/T) over the k highest logits, renormalised, and 0 outside
them. Every token tied with the k-th highest logit is kept (Cooper et al.'s code masks `z < kth`, which keeps ties
too). So log q(true) = z_true/T − logsumexp over {v : z_v ≥ kth} of z_v/T when the true token's rank is ≤ k (rank =
1 + the tokens with a strictly higher logit), else −inf. Reduced in float32 (float64 for float64 logits), a block
of rows at a time: never a (windows, T, vocab) tensor.

Greedy decoding under Cooper et al.'s code is top-k with k = 1, so m tokens tied at the top each get 1/m
(`top_ties`); our greedy flag counts a true token tied at the top as the model's choice (rank 1).
"""
from __future__ import annotations

import math

import torch

from ..model.reduce import stats_dtype

#: Rows reduced at once on the CPU: the float32 temporaries of a block stay in the cache.
REDUCE_CHUNK_ROWS = 64


@torch.inference_mode()
def reduce_suffix_logits(logits: torch.Tensor, targets: torch.Tensor, top_k: int,
                         temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(log q(true) under top-k sampling (rows,), rank of the true token (rows,) int64) for a (rows, vocab) block."""
    z = logits.to(stats_dtype(logits.dtype))
    if temperature != 1.0:
        z = z / temperature
    true = z.gather(-1, targets[:, None]).squeeze(-1)  # (rows,)
    rank = (z > true[:, None]).sum(-1, dtype=torch.int32).to(torch.int64) + 1  # (rows,)
    k = min(top_k, z.shape[-1])
    top = torch.topk(z, k, dim=-1, sorted=False).values  # (rows, k)
    kth = top.min(dim=-1).values  # (rows,)
    lse = torch.logsumexp(top, dim=-1)
    ties = (z >= kth[:, None]).sum(-1, dtype=torch.int32) - k  # tokens tied with the k-th beyond the k kept
    if bool((ties > 0).any()):
        extra = kth + torch.log(ties.clamp_min(1).to(z.dtype))
        lse = torch.where(ties > 0, torch.logaddexp(lse, extra), lse)
    logq = torch.where(rank <= k, true - lse, torch.full_like(true, -math.inf))
    return logq, rank


@torch.inference_mode()
def top_ties(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """(rows,) int64: how many tokens share the highest logit of each row of a (rows, vocab) block, on the logits as
    `reduce_suffix_logits` reduces them (upcast, divided by the temperature)."""
    z = logits.to(stats_dtype(logits.dtype))
    if temperature != 1.0:
        z = z / temperature
    return (z == z.max(dim=-1, keepdim=True).values).sum(-1, dtype=torch.int32).to(torch.int64)


def reduce_suffix_rows(logits: torch.Tensor, targets: torch.Tensor, top_k: int,
                       temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`reduce_suffix_logits` of a block of rows, `REDUCE_CHUNK_ROWS` at a time on the CPU (at once elsewhere)."""
    if logits.device.type != "cpu":
        return reduce_suffix_logits(logits, targets, top_k, temperature)
    parts = [reduce_suffix_logits(logits[i : i + REDUCE_CHUNK_ROWS], targets[i : i + REDUCE_CHUNK_ROWS], top_k,
                                  temperature) for i in range(0, logits.shape[0], REDUCE_CHUNK_ROWS)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

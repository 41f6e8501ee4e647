"""Positional Decay Reweighting (PDR; Liu, Yang, Lu, Piękos, Chen, Wang & Guo, ACL 2026 long 562, arXiv 2601.06827):
a plug-in parameter `pdr_alpha` of `loss`, `min_k` and `min_k_pp` (METHODS-API.md §22; docs/methods.md, "PDR").

Memorisation signal sits more in a text's early tokens, so token scores are weighted down with position:

    w(t) = 1 − α·(t−1)/(T−1),  t = 1…T over the T scored tokens (BOS policy), w = 1 when T = 1
    pdr_loss = (1/T) Σ_t w(t)·ℓ_t
    pdr_min_k(++) = (1/|S|) Σ_{t∈S} w(t)·s_t,  S = the Min-K% selection on the RAW (unweighted) s_t

The divisor is T or |S|, not Σw; per-token output is w(t)·s_t; the orientation is the method's own (w ≥ 0).
Where the form comes from: no code and no paper body were read. The linear form and the order and divisor come from
third-party readings of the paper (a review, a reading of its Eq. 8–9) [3rd]; α = 1 as the value to use is ours
(the reviews report α = 1 in most settings). `pdr_alpha=None` (the default) is no reweighting: the method's own
numbers, bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..api import Score, batch_selection, is_int, lowest_k, mean_of_all, param

#: The α the docs and the help suggest when PDR is switched on (ours, METHODS-API.md §22).
PDR_ALPHA = 1.0


def check_pdr_alpha(alpha: float | None) -> None:
    """α is None (off) or a number in [0, 1]: weights stay in [1 − α, 1], never negative (the orientation holds)."""
    if alpha is None:
        return
    number = is_int(alpha) or isinstance(alpha, (float, np.floating))
    if not number or not 0 <= alpha <= 1:
        raise ValueError(f"pdr_alpha must be a number in [0, 1], or None for no reweighting (got {alpha!r})")


@dataclass(frozen=True)
class PdrParams:
    """The PDR plug-in's one parameter, for a method's parameters dataclass to inherit (validated here, once).

    List it before `KParams` among the bases (`class P(PdrParams, KParams)`), so that `k` stays the first field and
    both checks run (this one hands on to the next base's `__post_init__`).
    """

    pdr_alpha: float | None = param(
        None, "positional decay reweighting (PDR): token t of T weighs 1 − α·(t−1)/(T−1), min-k% still chosen on the "
              f"raw scores; unset = off (the method as published); {PDR_ALPHA:g} = the α we suggest",
        low=0.0, high=1.0, step=0.05)

    def __post_init__(self) -> None:
        check_pdr_alpha(self.pdr_alpha)
        after = getattr(super(), "__post_init__", None)
        if after is not None:
            after()


def pdr_weights(n: int, alpha: float) -> np.ndarray:
    """(n,) float64 weights w(t) = 1 − α·(t−1)/(n−1) for t = 1…n; all 1 when n = 1."""
    t = np.arange(n, dtype=np.float64)  # t − 1
    return 1.0 - alpha * t / max(n - 1, 1)


def pdr_mean(token_scores: np.ndarray, alpha: float) -> Score:
    """`pdr_loss`: (1/T) Σ w(t)·s_t over every token; the token scores shown are w(t)·s_t."""
    return mean_of_all(pdr_weights(token_scores.shape[0], alpha) * token_scores)


def pdr_lowest_k(token_scores: np.ndarray, k: float, alpha: float) -> Score:
    """`pdr_min_k(++)`: S chosen on the raw scores (the Min-K% rule), then (1/|S|) Σ_{t∈S} w(t)·s_t.

    The Score has no `k`: its value is not the min-k% mean of its (weighted) token scores, so `Score.at_k` must not
    redraw it from them.
    """
    raw = lowest_k(token_scores, k)
    weighted = pdr_weights(token_scores.shape[0], alpha) * token_scores
    return Score(float(np.mean(weighted[raw.selected], dtype=np.float64)), weighted, raw.selected)


def batch_pdr_weights(lengths: np.ndarray, width: int, alpha: float) -> np.ndarray:
    """(b, width) the weights of each row's tokens (`pdr_weights` of its length; any value in the padding)."""
    t = np.arange(width, dtype=np.float64)[None, :]  # t − 1
    return 1.0 - alpha * t / np.maximum(lengths - 1, 1)[:, None].astype(np.float64)


def batch_pdr_mean(values: np.ndarray, valid: np.ndarray, lengths: np.ndarray, alpha: float) -> np.ndarray:
    """(b,) `pdr_mean(...).value` of every row of NaN-padded `values`."""
    weighted = batch_pdr_weights(lengths, values.shape[1], alpha) * values
    return np.where(valid, weighted, 0.0).sum(axis=1) / valid.sum(axis=1)


def batch_pdr_lowest_k(values: np.ndarray, lengths: np.ndarray, k: float, alpha: float) -> np.ndarray:
    """(b,) `pdr_lowest_k(...).value` of every row: the stable ascending sort of the raw values picks each row's
    `max(1, int(n·k))` tokens (ties in text order, its NaNs then the padding last), their weighted values averaged."""
    order = np.argsort(values, axis=1, kind="stable")
    weighted = np.take_along_axis(batch_pdr_weights(lengths, values.shape[1], alpha) * values, order, axis=1)
    chosen, n_sel = batch_selection(lengths, values.shape[1], k)
    return np.where(chosen, weighted, 0.0).sum(axis=1) / n_sel

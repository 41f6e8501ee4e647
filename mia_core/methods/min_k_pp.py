"""Min-K%++ (Zhang et al. 2025, Eq. 3–4): is the true token a mode of the next-token distribution?

Token score `(log p(x_t|x_<t) − μ_t) / σ_t` with μ, σ the mean and standard deviation of log p
under the model's own next-token distribution; sequence score = mean of the lowest k%.
σ is clamped to ≥ 1e-12 (METHODS.md, "Non-finite values").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..token_stats import TokenStats
from .registry import Score, lowest_k, register, require_tokens

SIGMA_FLOOR = 1e-12


@dataclass(frozen=True)
class MinKPlusPlusParams:
    k: float = 0.2
    """Fraction of tokens (lowest scores) averaged; n = max(1, floor(k · n_scored))."""


def min_k_pp_token_scores(stats: TokenStats) -> np.ndarray:
    """(logprob − μ) / max(σ, 1e-12) per scored token, in float64."""
    sigma = np.maximum(stats.sigma.astype(np.float64), SIGMA_FLOOR)
    return (stats.logprob.astype(np.float64) - stats.mu.astype(np.float64)) / sigma


@register("min_k_pp", label="Min-K%++", params=MinKPlusPlusParams,
          summary="Min-K% on z-scored log-probs: is each true token a mode of the model's prediction?")
def min_k_pp(stats: TokenStats, params: MinKPlusPlusParams) -> Score:
    """Sequence score = mean of the lowest k% of the z-scored log-probs."""
    require_tokens(stats)
    return lowest_k(min_k_pp_token_scores(stats), params.k)

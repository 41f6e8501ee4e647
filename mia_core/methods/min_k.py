"""Min-K% Prob (Shi et al. 2024, Eq. 1): mean of the lowest k% token log-probs."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..token_stats import TokenStats
from .registry import Score, lowest_k, register, require_tokens


@dataclass(frozen=True)
class MinKParams:
    k: float = 0.2
    """Fraction of tokens (lowest scores) averaged; n = max(1, floor(k · n_scored))."""


@register("min_k", label="Min-K% Prob", params=MinKParams, access=("target log-probs",),
          summary="Mean log-prob of the k% least likely tokens: non-members contain a few outlier tokens.")
def min_k(stats: TokenStats, params: MinKParams) -> Score:
    """Token score = `logprob`; sequence score = mean of the lowest k%."""
    require_tokens(stats)
    return lowest_k(stats.logprob.astype(np.float64), params.k)

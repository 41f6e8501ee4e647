"""Loss attack (Yeom et al. 2018; "PPL" in the papers): mean token log-prob, i.e. −loss."""
from __future__ import annotations

import numpy as np

from ..token_stats import TokenStats
from .registry import NoParams, Score, mean_of_all, register, require_tokens


@register("loss", label="Loss (−mean NLL)", access=("target log-probs",), summary="Mean log-probability of the text's tokens; members are more likely.")
def loss(stats: TokenStats, params: NoParams) -> Score:
    """Sequence score = mean of `logprob` (higher = member)."""
    require_tokens(stats)
    return mean_of_all(stats.logprob.astype(np.float64))

"""Loss attack (Yeom et al. 2018; "PPL" in the papers): mean token log-prob, i.e. −loss."""
from __future__ import annotations

import math

import numpy as np

from ..api import (
    LOGP, LOGP_RANGE, AccessNeeds, NoParams, Score, TokenStats, TokenView, mean_of_all, register, require_tokens,
)


@register("loss", access=AccessNeeds(),
          view=TokenView(LOGP, "every token: the score is their mean log p", token_range=LOGP_RANGE),
          label="Loss (−mean NLL)",
          reading=lambda v: f"the model's average log-probability per token is {v:.2f} "
                            f"(perplexity {math.exp(min(-v, 700)):.1f}).",
          formula=r"\mathrm{score}(x) = \frac{1}{n}\sum_{t} \log p(x_t \mid x_{<t})",
          idea="Models fit their training data: members have higher likelihood (lower loss).",
          summary="Mean log-probability of the text's tokens; members are more likely.")
def loss(stats: TokenStats, params: NoParams) -> Score:
    """Sequence score = mean of `logprob` (higher = member)."""
    require_tokens(stats)
    return mean_of_all(stats.logprob.astype(np.float64))

"""Loss attack (Yeom et al. 2018; "PPL" in the papers): mean token log-prob, i.e. −loss.

With `pdr_alpha` set, the positionally reweighted mean of PDR (`pdr.py`; METHODS-API.md §22).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..api import (
    LOGP, LOGP_RANGE, AccessNeeds, Paper, Score, StatsBatch, TokenStats, TokenView, batch_mean, mean_of_all,
    register, require_tokens,
)
from .pdr import PdrParams, batch_pdr_mean, pdr_mean


@dataclass(frozen=True)
class LossParams(PdrParams):
    """pdr_alpha: positional decay reweighting of the mean (None = off, the plain loss)."""


def loss_batch(batch: StatsBatch, params: LossParams) -> np.ndarray:
    """`loss` of every text of a batch: each row's mean log p (PDR-weighted when `pdr_alpha` is set)."""
    if params.pdr_alpha is not None:
        return batch_pdr_mean(batch.logprob, batch.valid, batch.lengths, params.pdr_alpha)
    return batch_mean(batch.logprob, batch.valid)


@register("loss", access=AccessNeeds(),
          lesson=110, paper=Paper("Yeom, Giacomelli, Fredrikson & Jha", 2018,
                                  "https://arxiv.org/abs/1709.01604",
                                  "Privacy Risk in Machine Learning: Analyzing the Connection to Overfitting",
                                  "IEEE CSF 2018"),
          fails=("It ranks texts by how predictable they are, not by whether they were seen: plain, common or "
                 "repetitive text scores high either way. On MIMIR, where members and non-members come from the same "
                 "sources, it stays near chance (mean AUROC 52.1–54.9 on Pythia 160M–12B, Min-K%++ paper, Table 2)."),
          view=TokenView(LOGP, "every token: the score is their mean log p", token_range=LOGP_RANGE),
          label="Loss (−mean NLL)", params=LossParams,
          reading=lambda v: f"the model's average log-probability per token is {v:.2f} "
                            f"(perplexity {math.exp(min(-v, 700)):.1f}).",
          formula=r"\mathrm{score}(x) = \frac{1}{n}\sum_{t} \log p(x_t \mid x_{<t})",
          idea="Models fit their training data: members have higher likelihood (lower loss).",
          summary="Mean log-probability of the text's tokens; members are more likely.", batch=loss_batch)
def loss(stats: TokenStats, params: LossParams) -> Score:
    """Sequence score = mean of `logprob` (higher = member); with PDR, (1/T) Σ w(t)·logprob_t."""
    require_tokens(stats)
    if params.pdr_alpha is not None:
        return pdr_mean(stats.logprob.astype(np.float64), params.pdr_alpha)
    return mean_of_all(stats.logprob.astype(np.float64))

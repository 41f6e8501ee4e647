"""Min-K% Prob (Shi et al. 2024, Eq. 1): mean of the lowest k% token log-probs.

With `pdr_alpha` set, PDR's reweighted mean over the same selection (`pdr.py`; METHODS-API.md §22).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..api import (
    LOGP, LOGP_RANGE, AccessNeeds, KParams, Paper, Score, StatsBatch, TokenStats, TokenView, batch_lowest_k, lowest_k,
    register, require_tokens,
)
from .pdr import PdrParams, batch_pdr_lowest_k, pdr_lowest_k


@dataclass(frozen=True)
class MinKParams(PdrParams, KParams):
    """k: the fraction of tokens (lowest log-probs) averaged; pdr_alpha: positional decay reweighting (None = off)."""


def min_k_batch(batch: StatsBatch, params: MinKParams) -> np.ndarray:
    """`min_k` of every text of a batch: the mean of each row's k% lowest log p (PDR-weighted when set)."""
    if params.pdr_alpha is not None:
        return batch_pdr_lowest_k(batch.logprob, batch.lengths, params.k, params.pdr_alpha)
    return batch_lowest_k(batch.logprob, batch.lengths, params.k)


@register("min_k", access=AccessNeeds(),
          lesson=210, paper=Paper("Shi, Ajith, Xia, Huang, Liu, Blevins, Chen & Zettlemoyer", 2024,
                                  "https://arxiv.org/abs/2310.16789",
                                  "Detecting Pretraining Data from Large Language Models", "ICLR 2024"),
          fails=("It tends to misclassify non-member texts made of many common words the model predicts with high "
                 "probability (DC-PDD paper, abstract); short inputs are harder than long ones (Min-K%++ paper: 62.2% "
                 "vs 66.8% AUROC on 64- and 128-token WikiMIA texts with Mamba-1.4B)."),
          view=TokenView(LOGP, "the k% least likely tokens: the score is their mean log p", token_range=LOGP_RANGE),
          label="Min-K% Prob", params=MinKParams,
          reading=lambda v: f"the k% least likely tokens average a log-probability of {v:.2f}: members tend to have "
                            "fewer very surprising tokens.",
          formula=r"\mathrm{score}(x) = \frac{1}{|S|}\sum_{t\in S} \log p(x_t \mid x_{<t}),\ "
                  r"S = \text{the } k\% \text{ lowest}",
          idea="Non-members contain a few very surprising tokens; members rarely do.",
          summary="Mean log-prob of the k% least likely tokens: non-members contain a few outlier tokens.",
          batch=min_k_batch)
def min_k(stats: TokenStats, params: MinKParams) -> Score:
    """Token score = `logprob`; sequence score = mean of the lowest k% (with PDR: of w(t)·logprob over them)."""
    require_tokens(stats)
    if params.pdr_alpha is not None:
        return pdr_lowest_k(stats.logprob.astype(np.float64), params.k, params.pdr_alpha)
    return lowest_k(stats.logprob.astype(np.float64), params.k)

"""Min-K%++ (Zhang et al. 2025, Eq. 3–4): is the true token a mode of the next-token distribution?

Token score `(log p(x_t|x_<t) − μ_t) / σ_t` with μ, σ the mean and standard deviation of log p
under the model's own next-token distribution; sequence score = mean of the lowest k%.
σ is clamped to ≥ 1e-12 (docs/methods.md, "Non-finite values"). With `pdr_alpha` set, PDR's reweighted mean over
the same selection (`pdr.py`; METHODS-API.md §22).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..api import (
    AccessNeeds, KParams, Paper, Score, StatsBatch, TokenStats, TokenView, batch_lowest_k, lowest_k, register,
    require_tokens,
)
from .pdr import PdrParams, batch_pdr_lowest_k, pdr_lowest_k

SIGMA_FLOOR = 1e-12


@dataclass(frozen=True)
class MinKPlusPlusParams(PdrParams, KParams):
    """k: the fraction of tokens (lowest z-scores) averaged; pdr_alpha: positional decay reweighting (None = off)."""


def min_k_pp_token_scores(stats: TokenStats) -> np.ndarray:
    """(logprob − μ) / max(σ, 1e-12) per scored token, in float64 (in place: two float64 arrays at a time, not four,
    for a text of 10^7 tokens; the same numbers)."""
    z = stats.logprob.astype(np.float64)
    z -= stats.mu  # float32 read as float64, as `astype` would
    sigma = stats.sigma.astype(np.float64)
    np.maximum(sigma, SIGMA_FLOOR, out=sigma)
    z /= sigma
    return z


def min_k_pp_batch(batch: StatsBatch, params: MinKPlusPlusParams) -> np.ndarray:
    """`min_k_pp` of every text of a batch: the same z-scores in float64 (NaN in the padding), then each row's k%
    lowest."""
    z = batch.logprob - batch.padded("mu")
    z /= np.maximum(batch.padded("sigma"), SIGMA_FLOOR)  # NaN padding stays NaN: np.maximum propagates it
    if params.pdr_alpha is not None:
        return batch_pdr_lowest_k(z, batch.lengths, params.k, params.pdr_alpha)
    return batch_lowest_k(z, batch.lengths, params.k)


@register("min_k_pp",
          lesson=220, paper=Paper("Zhang, Sun, Yeats, Ouyang, Kuo, Zhang, Yang & Li", 2025,
                                  "https://arxiv.org/abs/2404.02936",
                                  "Min-K%++: Improved Baseline for Detecting Pre-Training Data from Large Language "
                                  "Models", "ICLR 2025"),
          fails=("Where members and non-members are drawn from the same dataset (MIMIR) it barely improves on Min-K% "
                 "(relative AUROC −0.2% to +2.8% on Pythia 160M–12B, its Table 2); with a text prepended (online "
                 "detection) its numbers fall below the offline ones (its Table 4)."),
          access=AccessNeeds(full_distribution=True,
                             why="the mean and spread of the full next-token distribution"),
          view=TokenView("z = (log p − μ) / σ: the true token against the model's expected log p at that position",
                         "the k% lowest z: the score is their mean",
                         centre=0.0,
                         token_range=(-3.0, 1.0)),
          label="Min-K%++", params=MinKPlusPlusParams,
          reading=lambda v: f"the k% least expected tokens sit {abs(v):.2f} standard deviations "
                            f"{'below' if v < 0 else 'above'} what the model expected on average; memorised text "
                            "tends to score near zero or above.",
          formula=r"z_t = \frac{\log p(x_t \mid x_{<t}) - \mu_t}{\sigma_t},\ \mu_t = \mathbb{E}_{v\sim p}\log p(v),\ "
                  r"\sigma_t^2 = \mathrm{Var}_{v\sim p}\log p(v),\ \mathrm{score} = \text{mean of the } k\% \text{ lowest } z_t",
          idea="Training pushes each true token towards a mode of the next-token distribution; average the k% lowest z.",
          summary="Min-K% on z-scored log-probs: is each true token a mode of the model's prediction?",
          batch=min_k_pp_batch)
def min_k_pp(stats: TokenStats, params: MinKPlusPlusParams) -> Score:
    """Sequence score = mean of the lowest k% of the z-scored log-probs (with PDR: of w(t)·z_t over them)."""
    require_tokens(stats)
    if params.pdr_alpha is not None:
        return pdr_lowest_k(min_k_pp_token_scores(stats), params.k, params.pdr_alpha)
    return lowest_k(min_k_pp_token_scores(stats), params.k)

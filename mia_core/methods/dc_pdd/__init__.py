"""DC-PDD (Zhang et al. 2024, Eq. 5–8): token probabilities calibrated by corpus token frequencies.

α_t = −p(x_t | x_<t) · log f(x_t), capped at `a`, with f the Laplace-smoothed occurrence frequency
of the token in a reference corpus (same tokenizer); β = mean of α over the first occurrence of
each distinct token id. Higher β = member. The paper uses a = 0.01 (WikiMIA) and 10 (BookMIA).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...api import (
    AccessNeeds, Paper, Score, StatsBatch, TokenStats, TokenView, first_occurrences_batch, param, register,
    require_tokens,
)


@dataclass(frozen=True)
class DcPddParams:
    a: float = param(0.01, "upper bound on each token's α (> 0; the paper's LUP strategy)", low=0.001, high=1.0,
                     step=0.001)

    def __post_init__(self) -> None:
        if isinstance(self.a, bool) or not isinstance(self.a, (int, float, np.integer, np.floating)) or not self.a > 0:
            raise ValueError(f"a must be > 0 (got {self.a!r})")


def first_occurrences(token_ids: np.ndarray) -> np.ndarray:
    """Boolean mask of the first occurrence of each distinct token id."""
    mask = np.zeros(token_ids.shape[0], dtype=bool)
    mask[np.unique(token_ids, return_index=True)[1]] = True
    return mask


def check_width(stats: TokenStats, freq) -> None:
    """The frequency table counts the model's whole vocabulary (one entry per logit)."""
    if stats.vocab_width and len(freq.counts) != stats.vocab_width:
        raise ValueError(
            f"frequency table has {len(freq.counts)} entries but the model's logits are {stats.vocab_width} wide"
        )


def dc_pdd_batch(batch: StatsBatch, params: DcPddParams, *, freq) -> np.ndarray:
    """`dc_pdd` of every text of a batch: α over the padded arrays, then each row's mean over its first occurrences."""
    for st in batch.stats:
        check_width(st, freq)
    ids = batch.token_ids
    valid = batch.valid
    p = np.exp(batch.logprob)
    alpha = np.minimum(-p * np.log(freq.frequencies(np.where(valid, ids, 0))), params.a)
    first = first_occurrences_batch(ids, valid)
    return np.where(first, alpha, 0.0).sum(axis=1) / first.sum(axis=1)


@register("dc_pdd", access=AccessNeeds(),
          lesson=260, paper=Paper("Zhang, Zhang, Guo, de Rijke, Fan & Cheng", 2024,
                                  "https://aclanthology.org/2024.emnlp-main.300",
                                  "Pretraining Data Detection for Large Language Models: A Divergence-based "
                                  "Calibration Method", "EMNLP 2024"),
          fails=("The reference corpus only estimates the training corpus's token frequencies and must be in the "
                 "text's language, and the cap on calibrated probabilities changes results a lot with no rule for "
                 "setting it (the paper's Limitations)."),
          view=TokenView(),
          label="DC-PDD", params=DcPddParams, needs=("stats", "freq"),
          reading=lambda v: f"probability-weighted corpus rarity over first occurrences: {v:.4f}.",
          formula=r"\alpha_t = \min\!\big(-p(x_t \mid x_{<t}) \log f(x_t),\ a\big),\ "
                  r"\beta = \mathrm{mean}_{\text{first occurrences}}\ \alpha_t",
          idea="Calibrates probabilities by how rare a token is in a reference corpus.",
          cost="1 forward pass (+ a frequency table, built once)",
          summary="Token probability × corpus surprise (−log frequency), capped, over first occurrences.",
          batch=dc_pdd_batch)
def dc_pdd(stats: TokenStats, params: DcPddParams, *, freq) -> Score:
    """β = mean over first occurrences of min(−p_t · log f(x_t), a)."""
    require_tokens(stats)
    check_width(stats, freq)
    p = np.exp(stats.logprob.astype(np.float64))
    alpha = np.minimum(-p * np.log(freq.frequencies(stats.token_ids)), params.a)
    first = first_occurrences(stats.token_ids)
    return Score(float(np.mean(alpha[first])), alpha, first)

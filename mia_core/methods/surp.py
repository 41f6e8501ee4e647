"""SURP, surprising tokens (Zhang & Wu 2024, arXiv 2407.21248; docs/methods.md, "surp").

A "surprising" token is one the model predicts with low entropy (it is sure) while giving the true
token a low probability (it is wrong). Seen data should hold fewer such tokens, or less surprising
ones. With `L` the `max(1, floor(k·n))` lowest log-probs (stable ascending sort, the rounding of
`registry.lowest_k`) and `S = {t ∈ L : entropy_t < e_max}` (entropy in nats):

    score = mean_{t ∈ S} log p(x_t | x_<t)          (higher = member, no negation)

An empty `S` gives the sentinel −100.0 with `details["empty_selection"] = True`: the text is ranked
as the strongest non-member. That convention comes from the SoK benchmark's port
(`computationalprivacy/mia_llms_benchmark attacks/surp.py`), not from the paper.

No implementation by the authors was found; the SoK port is the only reference. Deviations from it:
at least one token in `L` (the port's `int(k/100·n)` can be 0), and a stable sort where
`torch.topk` breaks ties arbitrarily; k is a fraction here (0.4), a percentage there (40).

Unconfirmed (METHODS-FIELD.md §4): the defaults k = 0.4, e_max = 2.0 are what SoK calls the paper's
best setup (Section 5.3); whether the paper thresholds within-text percentiles or absolute
probabilities, and whether its entropy is in bits or nats, could not be checked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..api import (
    LOGP, LOGP_RANGE, AccessNeeds, KParams, Paper, Score, TokenStats, TokenView, lowest_k, param, register,
    require_tokens,
)

#: Value of a text with no surprising token (the SoK port's replacement for its NaN).
EMPTY_VALUE = -100.0


@dataclass(frozen=True)
class SurpParams(KParams):
    """Parameters of SURP (k validated by `KParams`)."""

    k: float = param(0.4, "fraction of tokens (lowest log-probs) that are candidates; max(1, floor(k · n_scored)) of "
                     "them", low=0.05, high=1.0, step=0.05)
    e_max: float = param(2.0, "entropy threshold in nats (> 0): a candidate counts only when the model's prediction had "
                         "entropy below it", low=0.1, high=10.0, step=0.1)

    def __post_init__(self) -> None:
        super().__post_init__()
        e = self.e_max
        if isinstance(e, bool) or not isinstance(e, (int, float, np.floating, np.integer)) or not (
                math.isfinite(e) and e > 0):
            raise ValueError(f"e_max must be a finite number of nats > 0 (got {e!r})")


def _reading(v: float) -> str:
    """One sentence on a SURP score, naming the sentinel when no token was surprising."""
    if v == EMPTY_VALUE:
        return ("no token was both among the k% least likely and predicted with low entropy; the score is the "
                "sentinel −100, which ranks the text as the least member-like.")
    return (f"the surprising tokens (the model was sure, yet the true token was unlikely) average a log-probability "
            f"of {v:.2f}: a model is less surprised by text it has seen.")


@register("surp", access=AccessNeeds(full_distribution=True, why="the entropy of the full next-token distribution"),
          lesson=230, paper=Paper("Zhang & Wu", 2024, "https://arxiv.org/abs/2407.21248",
                                  "Adaptive Pre-training Data Detection for Large Language Models via Surprising Tokens",
                                  "arXiv:2407.21248"),
          fails=("A text with no low-entropy token among its least likely gets the sentinel −100 and ranks as the "
                 "strongest non-member; its defaults (k 0.4, 2 nats) are the SoK benchmark's reading of the paper, and "
                 "no code by its authors was found (METHODS-FIELD.md §4)."),
          view=TokenView(LOGP,
                         "the surprising tokens: among the k% least likely, yet predicted with entropy below e_max "
                         "(the model was sure and wrong); the score is their mean log p",
                         token_range=LOGP_RANGE),
          label="SURP", params=SurpParams, reading=_reading,
          formula=r"S = \{t \in \text{the } k\% \text{ lowest } \ell_t : H_t < e_{\max}\},\ "
                  r"\mathrm{score}(x) = \frac{1}{|S|}\sum_{t\in S} \log p(x_t \mid x_{<t})\ "
                  r"(-100 \text{ if } S = \emptyset)",
          idea="Tokens the model was sure about yet got wrong are surprising; seen text surprises it less.",
          summary="Mean log-prob of the k% least likely tokens that were predicted with low entropy "
                  "(confident but wrong).")
def surp(stats: TokenStats, params: SurpParams) -> Score:
    """Token score = `logprob`; sequence score = its mean over the low-entropy tokens among the k% lowest."""
    require_tokens(stats)
    logprob = stats.logprob.astype(np.float64)
    lowest = lowest_k(logprob, params.k).selected  # L, same rounding and tie order as min_k
    selected = lowest & (stats.entropy.astype(np.float64) < params.e_max)  # S
    empty = not selected.any()
    value = EMPTY_VALUE if empty else float(np.mean(logprob[selected]))
    details = {"empty_selection": empty, "n_lowest": int(lowest.sum()), "n_surprising": int(selected.sum())}
    return Score(value, logprob, selected, details)

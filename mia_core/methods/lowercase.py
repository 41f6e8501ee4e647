"""Lowercase calibration (Carlini et al. 2021): how much worse the model finds the lowercased text.

Score = loss(text.lower()) / loss(text), loss = −mean logprob, each text tokenised on its own.
Members lose more likelihood when lowercased, so the ratio is larger for members. The per-token
scores shown are the original text's log-probs (the two tokenisations do not align).
"""
from __future__ import annotations

import numpy as np

from ..api import AccessNeeds, NoParams, Paper, Score, TokenStats, TokenView, register, require_tokens

#: Guards the division for a text the model predicts with certainty (loss 0).
LOSS_FLOOR = 1e-12


@register("lowercase", access=AccessNeeds(further_passes=True, why="a further pass on the lowercased text"),
          lesson=310, paper=Paper("Carlini, Tramèr, Wallace et al.", 2021, "https://arxiv.org/abs/2012.07805",
                                  "Extracting Training Data from Large Language Models", "USENIX Security 2021"),
          fails=("It needs a second pass of the model, which the Min-K%++ paper finds impractical for online "
                 "detection; a text with no capital letters is unchanged by lowercasing and scores exactly 1."),
          view=TokenView("the per-token output shown with Lowercase ratio, which scores the text as a whole (for "
                         "orientation only)",
                         "the tokens it looked at"),
          label="Lowercase ratio", needs=("stats", "lowercase_stats"), token_level=False,
          reading=lambda v: f"lowercasing makes the text {v:.2f}× as hard for the model; members lose more.",
          formula=r"\mathrm{score}(x) = \mathrm{loss}(\mathrm{lower}(x)) / \mathrm{loss}(x)",
          idea="Members lose more likelihood when their exact casing is destroyed.", cost="2 forward passes",
          extra_passes=lambda p: 1,
          summary="Loss of the lowercased text over the loss of the text: members lose more when lowercased.")
def lowercase(stats: TokenStats, params: NoParams, *, lowercase_stats: TokenStats) -> Score:
    """`loss(lowercased) / max(loss(original), 1e-12)`."""
    require_tokens(stats)
    require_tokens(lowercase_stats)
    loss_orig = -float(np.mean(stats.logprob, dtype=np.float64))
    loss_lower = -float(np.mean(lowercase_stats.logprob, dtype=np.float64))
    return Score(loss_lower / max(loss_orig, LOSS_FLOOR), stats.logprob.astype(np.float64), np.ones(stats.n_scored, bool))

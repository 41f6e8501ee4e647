"""Infilling Score (Raoof et al., "Infilling Score: A Pretraining Data Detection Algorithm for LLMs", Eq. 10–11).

Token score r_i = log of the ratio of the infilling likelihoods of the true token x_i and of the
model's top-1 guess x_i*, from x_i's own z-score gap plus m future tokens scored with x_i and with
x_i* in its place (docs/methods.md "infilling"). Sequence score = mean of the lowest k% of r_i.
Deviations from the authors' code, as docs/methods.md fixes them: the last token may serve as a future
token (their off-by-one drops it); positions where x_i is already the top-1 score exactly 0 with
no extra pass; `normalization="position"` (their 2025 code) is the default and "anchor" (their
2024 code and Algorithm 1) normalises every future term by position i's μ/σ. The substituted
branches share the text's prefix and run against one KV cache (see `mia_core.methods.infilling.engine`).
Texts longer than the context must be truncated (`long_text="truncate"`); sliding windows are refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...api import AccessNeeds, Paper, KParams, Score, TokenStats, TokenView, lowest_k, param, register, require_tokens
from ...deferred import deferred
from .settings import NORMALIZATIONS

if TYPE_CHECKING:  # the engine (torch) loads when a text is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import engine
else:
    engine = deferred(f"{__name__}.engine")


@dataclass(frozen=True)
class InfillingParams(KParams):
    """k: the fraction of positions (lowest r_i) averaged."""

    m: int | None = param(None, "future tokens per position (an integer ≥ 1); None = 1 for texts of ≤ 32 scored "
                          "tokens, else 5", low=1, high=32, step=1)
    normalization: str = param("position", '"position": each future term z-scored with its own μ/σ; "anchor": with '
                               "position i's", choices=NORMALIZATIONS)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.m is not None and (isinstance(self.m, bool) or not isinstance(self.m, (int, np.integer)) or self.m < 1):
            raise ValueError(f"m must be a positive integer (got {self.m!r})")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS} (got {self.normalization!r})")


@register("infilling",
          lesson=330, paper=Paper("Raoof et al.", 2025, "https://openreview.net/forum?id=9QPH1YQCMn",
                                  "Infilling Score: A Pretraining Data Detection Algorithm for Large Language Models",
                                  "ICLR 2025"),
          fails=("Its cost grows with the text: the reference code runs one full forward pass per position (30 s for a "
                 "256-token text with LLaMA-7B on an H200, METHODS.md); we evaluate the changed branches against a "
                 "shared prefix instead."),
          access=AccessNeeds(full_distribution=True,
                             further_passes=True,
                             why="the full next-token distribution after each candidate token"),
          view=TokenView(centre=0.0),
          label="Infilling Score", params=InfillingParams, needs=("stats", "lm"),
          reading=lambda v: f"the k% least supported tokens average {v:.2f}: each compares the true token with the "
                            "model's top guess, counting how much likelier the true token makes the next few tokens; "
                            "members' tokens are better supported by what follows.",
          formula=r"r_i = z_i(x_i) - z_i(x_i^{*}) + \sum_{j=1}^{m} \big[z_{i+j}(x_{i+j} \mid x_i) - "
                  r"z_{i+j}(x_{i+j} \mid x_i^{*})\big],\ \mathrm{score} = \text{mean of the } k\% \text{ lowest } r_i",
          idea="A member's true token explains the tokens that follow it better than the model's own top guess would.",
          cost="≈ m + 2 forward passes (KV-cache branches; the paper's loop: one per token)",
          extra_passes=lambda p: (p.m or 5) + 1,  # m left to the method: 5 beyond 32 tokens, counted so
          summary="Min-K% of infilling ratios: does the true token explain the following tokens as well as the "
                  "model's own top guess would?")
def infilling(stats: TokenStats, params: InfillingParams, *, lm: LanguageModel) -> Score:
    """Mean of the lowest k% of r_i; details: m, normalization and how many positions needed a branch."""
    require_tokens(stats)
    token_scores, facts = engine.infilling_token_scores(lm, stats, m=params.m, normalization=params.normalization)
    result = lowest_k(token_scores, params.k)
    return Score(result.value, result.token_scores, result.selected, facts, result.k)

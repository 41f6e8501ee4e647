"""EZ-MIA, Error-Zone MIA (Ilić, Stanojević & Cvejoski 2026, arXiv 2601.12104; docs/methods.md, "ez_mia").

Where the target gets a token wrong (its top-1 ≠ the true token), fine-tuning still raises the true token for members.
With `d_t = ℓ_t − ℓ^ref_t` from the same-token reference pass (the reference run on the target's ids) and the error set
`E = {t : top1_t ≠ x_t}` without the first scored token,

    score = P / (N + 1e-12),   P = Σ_{t∈E, d_t>0} d_t,   N = Σ_{t∈E, d_t<0} |d_t|      (higher = member, no negation)

as `error_zone_pos_neg_sum_ratio` in the authors' code (`JetBrains-Research/ez-mia` aa0b6b7, `mia/ez_score.py`), the
"base" variant (their trained-reference `distillation` and `sft` variants are not implemented). Deviations
(METHODS-FIELD.md §12): with fewer than `min_error_tokens` error tokens the reference returns 0.0 (the lowest score,
for the best-predicted texts, likely members); we take the same ratio over every kept token and set
`details["fallback_all_tokens"]`. With N = 0 the reference returns 0.0 too; we keep P / 1e-12 (the strongest member
evidence) and set `details["no_negative_shift"]`; P = N = 0 gives 1.0. The reference pads to 128 tokens and resizes
the embeddings when a pad token is added; we use each model's own width. Its `ignore_bos` drops mask position 0
whatever sits there (x₁ for GPT-2, which has no BOS): `bos="none"` with `drop_first=True` reproduces it for GPT-2.
**Unconfirmed** in the paper: log-probs rather than probabilities, and `min_tokens`; left padding in their Llama runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..api import AccessNeeds, Paper, Score, TokenStats, is_int, param, register
from .token_shift import shift_view, token_shift

#: Added to the negative sum before dividing (the authors' ε).
EPS = 1e-12


@dataclass(frozen=True)
class EzMiaParams:
    """Parameters of EZ-MIA (the authors' defaults)."""

    min_error_tokens: int = param(2, "error tokens needed for the error-zone ratio; with fewer, the ratio runs over "
                                  "every kept token (an integer ≥ 1)", low=1, high=64, step=1)
    drop_first: bool = param(True, "leave the first scored token out, as the authors' ignore_bos does",
                             choices=(True, False))

    def __post_init__(self) -> None:
        if not is_int(self.min_error_tokens) or self.min_error_tokens < 1:
            raise ValueError(f"min_error_tokens must be an integer ≥ 1 (got {self.min_error_tokens!r})")
        if not isinstance(self.drop_first, (bool, np.bool_)):
            raise ValueError(f"drop_first must be true or false (got {self.drop_first!r})")


def _reading(v: float) -> str:
    """One sentence on an EZ-MIA score."""
    return (f"where the target got the token wrong, it raised the true token {v:.2f}× as much as it lowered it, "
            "against the reference model; fine-tuning on the text pushes this above 1.")


@register("ez_mia",
          lesson=322, paper=Paper("Ilić, Stanojević & Cvejoski", 2026, "https://arxiv.org/abs/2601.12104",
                                  "Powerful Training-Free Membership Inference Against Autoregressive Language Models",
                                  "arXiv:2601.12104"),
          fails=("It needs a reference model with the target's tokenizer, ideally the checkpoint the target was "
                 "fine-tuned from; for a pre-trained target, a smaller model of its family is a deviation. The "
                 "authors' code returns 0.0 for a text with fewer than two error tokens or none that lost "
                 "probability, ranking the likeliest members lowest (METHODS-FIELD.md §12)."),
          access=AccessNeeds(top_k=1, why="the target's top-1 token at each position, to find the tokens it got wrong"),
          view=shift_view("the error tokens (the target's top-1 guess was another token) that enter the ratio"),
          label="EZ-MIA (error zone)", params=EzMiaParams, needs=("stats", "ref_same_token_stats"), token_level=True,
          reading=_reading,
          formula=r"d_t = \log p_{\text{target}}(x_t) - \log p_{\text{ref}}(x_t),\ "
                  r"E = \{t : \text{top-1}_{\text{target}}(t) \ne x_t\},\ "
                  r"\mathrm{score} = \frac{\sum_{t \in E,\, d_t > 0} d_t}{\sum_{t \in E,\, d_t < 0} |d_t| + 10^{-12}}",
          idea="Where the target still guesses wrong, fine-tuning raised the true token for members: weigh the raises "
               "against the drops.",
          cost="1 forward pass + 1 of the reference model on the target's tokens", extra_passes=lambda p: 1,
          summary="On the tokens the target gets wrong, how much it raised the true token against a reference model "
                  "versus how much it lowered it.")
def ez_mia(stats: TokenStats, params: EzMiaParams, *, ref_same_token_stats: TokenStats) -> Score:
    """Token score = d_t; sequence score = positive over negative shift on the error tokens (all kept tokens when
    there are fewer than `min_error_tokens`)."""
    shift = token_shift(stats, ref_same_token_stats)
    kept = np.ones(shift.shape[0], dtype=bool)
    kept[0] = not params.drop_first
    if not kept.any():
        raise ValueError(f"no scored token is left after dropping the first one (text {stats.text[:60]!r})")
    errors = kept & (stats.top1_id != stats.token_ids)
    fallback = int(errors.sum()) < params.min_error_tokens
    chosen = kept if fallback else errors
    d = shift[chosen]
    positive, negative = float(d[d > 0].sum()), float(-d[d < 0].sum())
    value = 1.0 if positive == 0 and negative == 0 else positive / (negative + EPS)
    details = {"error_tokens": int(errors.sum()), "positive_shift": positive, "negative_shift": negative,
               "fallback_all_tokens": fallback, "no_negative_shift": negative == 0}
    return Score(value, shift, chosen, details)

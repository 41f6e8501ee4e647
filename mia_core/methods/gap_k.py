"""Gap-K% (Kwak & Kim, arXiv 2601.19936, ACL 2026; docs/methods.md, "gap_k").

Training penalises the gap between the true token's log-prob and the top-1 prediction's, so members
have small gaps, and gaps are correlated over neighbouring tokens. Per scored token

    g_t = (log p(x_t | x_<t) − max_v log p(v | x_<t)) / max(σ_t, 1e-12)      (≤ 0; 0 = top-1 was right)

with σ_t the standard deviation of log p under the model's prediction (as Min-K%++). A 'valid'
moving average of width w over consecutive scored tokens gives m = n − w + 1 window means
s_i = mean(g_i … g_{i+w−1}) (s = g when n < w), and

    score = mean of the max(1, floor(k·m)) lowest s_i      (stable sort; higher = member, no negation)

Per-token output: g_t; selected = every token covered by a chosen window; the chosen windows' start
indices are in `details["window_starts"]`.

Deviations from the authors' code (`meaoww/gap-k` 28d8b93): `wikimia.py` clamps the variance at
1e-8 before the square root and `mimir.py` does not clamp at all (a one-hot prediction gives NaN or
−inf); we clamp σ at 1e-12 as `min_k_pp` does. Both scripts score under `tokenizer.encode`, i.e.
our `bos="none"`. The authors use w = 6 for LLaMA models on WikiMIA and w = 3 for Pythia, Mamba and
MIMIR; our default is 3. Nothing in METHODS-FIELD.md §5 is marked unconfirmed beyond the defaults:
the formula for g_t is the one on the authors' project page.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..api import AccessNeeds, KParams, Paper, Score, TokenStats, TokenView, param, register, require_tokens

#: σ is clamped here before dividing (docs/methods.md, "Non-finite values").
SIGMA_FLOOR = 1e-12


@dataclass(frozen=True)
class GapKParams(KParams):
    """Parameters of Gap-K% (k validated by `KParams`)."""

    k: float = param(0.2, "fraction of windows (lowest mean gaps) averaged; max(1, floor(k · m)) of the m windows",
                     low=0.05, high=1.0, step=0.05)
    w: int = param(3, "width of the moving average over consecutive scored tokens (an integer ≥ 1; 1 = no smoothing)",
                   low=1, high=64, step=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.w, bool) or not isinstance(self.w, (int, np.integer)) or self.w < 1:
            raise ValueError(f"w must be an integer ≥ 1 (got {self.w!r})")


def gap_token_scores(stats: TokenStats) -> np.ndarray:
    """(logprob − top1_logprob) / max(σ, 1e-12) per scored token, in float64 (≤ 0)."""
    sigma = np.maximum(stats.sigma.astype(np.float64), SIGMA_FLOOR)
    return (stats.logprob.astype(np.float64) - stats.top1_logprob.astype(np.float64)) / sigma


def window_means(g: np.ndarray, w: int) -> tuple[np.ndarray, int]:
    """('valid' moving averages of width w, the width used): g itself, width 1, when the text is shorter than w."""
    width = w if g.shape[0] >= w else 1
    return sliding_window_view(g, width).mean(axis=1), width  # (n − width + 1,)


def _reading(v: float) -> str:
    """One sentence on a Gap-K% score."""
    return (f"in its stretches furthest from the model's top guess, the true tokens sit {abs(v):.2f} standard "
            "deviations below the top prediction on average; memorised text stays close to 0.")


@register("gap_k",
          lesson=240, paper=Paper("Kwak & Kim", 2026, "https://arxiv.org/abs/2601.19936",
                                  "Gap-K%: Measuring Top-1 Prediction Gap for Detecting Pretraining Data", "ACL 2026"),
          fails=("The window width depends on the model (the authors use w = 6 for LLaMA on WikiMIA, w = 3 for Pythia, "
                 "Mamba and MIMIR), and a one-hot prediction (σ = 0) breaks the authors' code with NaN or −∞ "
                 "(METHODS-FIELD.md §5)."),
          access=AccessNeeds(full_distribution=True,
                             why="the top token's log-prob and the spread of the full next-token distribution"),
          view=TokenView("how far the true token sits below the model's top guess, in σ (0 = the top guess was right)",
                         "the chosen windows: the k% stretches of w tokens furthest below the top guess (listed "
                         "below); the score is their mean gap",
                         low="far below the top guess: less member-like",
                         centre=0.0,
                         token_range=(-4.0, 0.0)),
          label="Gap-K%", params=GapKParams, reading=_reading,
          formula=r"g_t = \frac{\log p(x_t \mid x_{<t}) - \max_v \log p(v \mid x_{<t})}{\sigma_t},\ "
                  r"s_i = \frac{1}{w}\sum_{j=i}^{i+w-1} g_j,\ "
                  r"\mathrm{score} = \text{mean of the } k\% \text{ lowest } s_i",
          idea="Training shrinks the gap between the true token and the top-1 prediction; average the k% worst "
               "stretches of w tokens.",
          summary="Gap between the true token and the top-1 prediction, in σ, smoothed over w tokens; mean of the "
                  "k% lowest windows.")
def gap_k(stats: TokenStats, params: GapKParams) -> Score:
    """Token score = g_t; sequence score = mean of the k% lowest moving averages of g."""
    require_tokens(stats)
    g = gap_token_scores(stats)
    means, width = window_means(g, params.w)
    m = means.shape[0]
    n_sel = max(1, int(m * params.k))  # the rounding of registry.lowest_k (k = 0.29, m = 100 → 28)
    starts = np.sort(np.argsort(means, kind="stable")[:n_sel])
    selected = np.zeros(g.shape[0], dtype=bool)
    for i in starts:
        selected[i:i + width] = True
    value = float(np.mean(means[starts]))
    details = {"window": int(width), "window_starts": [int(i) for i in starts], "n_windows": int(m)}
    return Score(value, g, selected, details)

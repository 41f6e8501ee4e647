"""`Score`: a method's answer for one text (value, higher = member, with its per-token explanation), and the
min-k% selection that many methods share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .token_stats import TokenStats


@dataclass(frozen=True)
class Score:
    """A sequence score and its per-token explanation.

    Attributes
    ----------
    value
        sequence score, higher = member.
    token_scores
        (n_scored,) per-token scores aligned with `TokenStats.token_ids`.
    selected
        (n_scored,) bool, the tokens that entered `value` (min-k% selection, first occurrences…).
    details
        what else a method wants to show (e.g. the neighbour texts of `neighbor`); plain
        JSON-able values; a list of dicts is drawn as a table by the dashboard.
    k
        the fraction `selected` was drawn with when `value` is the min-k% mean of `token_scores`
        (then `at_k` redraws it for another k without the model); None otherwise.
    """

    value: float
    token_scores: np.ndarray
    selected: np.ndarray
    details: dict[str, Any] = field(default_factory=dict)
    k: float | None = None

    def at_k(self, k: float) -> "Score | None":
        """This score redrawn for another k from its own token scores (no model needed), or None when its value
        is not a min-k% mean (it has no `k`)."""
        if self.k is None:
            return None
        if k == self.k:
            return self
        again = lowest_k(np.asarray(self.token_scores, dtype=np.float64), k)
        return Score(again.value, self.token_scores, again.selected, self.details, again.k)


def check_k(k: float) -> None:
    """k is a fraction of the scored tokens."""
    if isinstance(k, bool) or not isinstance(k, (int, float, np.floating, np.integer)) or not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1] (got {k})")


def as_fraction(k: float) -> float:
    """A checked k as a Python float, a NumPy float as the decimal it prints as (np.float32(0.7) → 0.7): then
    `int(n * k)` is one float64 product in the per-text and batch forms alike (in float32, 10 · 0.7 rounds up to 7;
    the float64 of float32 0.7 gives 6)."""
    check_k(k)
    return float(str(k)) if isinstance(k, np.floating) else float(k)


def lowest_k(token_scores: np.ndarray, k: float) -> Score:
    """Mean of the `max(1, floor(k·n))` lowest token scores (stable ascending sort), with the mask.

    `int(n * k)` is the reference code's rounding, floating-point artefacts included (k = 0.29,
    n = 100 selects 28); only its NaN for a zero selection differs.
    """
    k = as_fraction(k)
    n = token_scores.shape[0]
    n_sel = max(1, int(n * k))
    selected = _lowest_mask(token_scores, n_sel)
    # the mean over the chosen scores in ascending order, as the stable sort gives them: the same sum, bit for bit
    value = float(np.mean(np.sort(token_scores[selected]), dtype=np.float64))
    return Score(value, token_scores, selected, k=k)


def _lowest_mask(token_scores: np.ndarray, n_sel: int) -> np.ndarray:
    """The first `n_sel` tokens of a stable ascending sort, as a mask: those below the n_sel-th lowest score, then
    the earliest of those equal to it (a partition, not an argsort of every token: a tenth of the memory on 10^7)."""
    if np.isnan(token_scores).any():  # NaNs sort last; the partition's order for them is not the sort's
        selected = np.zeros(token_scores.shape[0], dtype=bool)
        selected[np.argsort(token_scores, kind="stable")[:n_sel]] = True
        return selected
    kth = np.partition(token_scores, n_sel - 1)[n_sel - 1]
    selected = token_scores < kth
    ties = np.flatnonzero(token_scores == kth)[: n_sel - int(np.count_nonzero(selected))]
    selected[ties] = True
    return selected


def mean_of_all(token_scores: np.ndarray) -> Score:
    """Mean over every token (loss-style methods)."""
    return Score(float(np.mean(token_scores, dtype=np.float64)), token_scores, np.ones(token_scores.shape[0], bool))


def require_tokens(stats: TokenStats) -> None:
    """Empty texts are an error with a clear message, never a NaN score."""
    if stats.n_scored == 0:
        preview = stats.text[:40] + ("…" if len(stats.text) > 40 else "")
        raise ValueError(f"no token to score in text {preview!r}: the text is empty (or a single token with bos='none')")

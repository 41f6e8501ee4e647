"""`StatsBatch`: the statistics of several texts as padded (texts, width) arrays, for methods' batch forms.

A method that reads only the statistics may declare a batch form (`register(..., batch=fn)`): one vectorised pass
over a batch's padded arrays instead of a Python call per text, so the host's work per text stays far below the
device's (docs/methods.md, "Batch forms"). The batch form must give the per-text form's value for every text, to
float64 summation order (tested for every method that has one). Float arrays are float64 and NaN-padded, so a sort
puts the padding after every real value (a real NaN too, as the per-text stable sort does); ids are padded with -1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .score import as_fraction
from .token_stats import TokenStats


@dataclass(frozen=True, eq=False)
class StatsBatch:
    """Padded statistics of texts that each have at least one scored token (`require_tokens` is the per-text form's)."""

    stats: tuple[TokenStats, ...]
    _padded: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.stats or any(st.n_scored == 0 for st in self.stats):
            raise ValueError("a StatsBatch holds texts with at least one scored token")

    @cached_property
    def lengths(self) -> np.ndarray:
        """(b,) scored tokens per text."""
        return np.fromiter((st.n_scored for st in self.stats), np.int64, len(self.stats))

    @cached_property
    def valid(self) -> np.ndarray:
        """(b, width) True where a position holds a text's token, False in the padding."""
        return np.arange(int(self.lengths.max()))[None, :] < self.lengths[:, None]

    def padded(self, name: str) -> np.ndarray:
        """A per-token field of every text as one (b, width) array: floats as float64 padded with NaN, ids with -1."""
        if name not in self._padded:
            parts = [getattr(st, name) for st in self.stats]
            floating = np.issubdtype(parts[0].dtype, np.floating)
            out = np.full(self.valid.shape, np.nan if floating else -1, np.float64 if floating else np.int64)
            out[self.valid] = np.concatenate(parts)  # row-major: each text's tokens in order, then the next text's
            self._padded[name] = out
        return self._padded[name]

    @property
    def logprob(self) -> np.ndarray:
        """(b, width) log p of each scored token, float64, NaN-padded."""
        return self.padded("logprob")

    @property
    def token_ids(self) -> np.ndarray:
        """(b, width) ids of the scored tokens, -1 in the padding."""
        return self.padded("token_ids")


def batch_mean(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(b,) mean of each row's valid entries (a NaN among them gives NaN, as `np.mean` of the text's own array)."""
    return np.where(valid, values, 0.0).sum(axis=1) / valid.sum(axis=1)


def batch_lowest_k(values: np.ndarray, lengths: np.ndarray, k: float) -> np.ndarray:
    """(b,) `score.lowest_k(...).value` of every row: the mean of each row's `max(1, int(n·k))` lowest entries.

    `values` is NaN-padded: a row sorts its real entries first (its own NaNs last, then the padding), so the
    selection is the stable ascending sort's, and a selection that reaches a NaN gives NaN, as per text.
    """
    chosen, n_sel = batch_selection(lengths, values.shape[1], k)
    return np.where(chosen, np.sort(values, axis=1), 0.0).sum(axis=1) / n_sel


def batch_selection(lengths: np.ndarray, width: int, k: float) -> tuple[np.ndarray, np.ndarray]:
    """((b, width) mask of each row's first `max(1, int(n·k))` places in sorted order, (b,) those counts): the
    min-k% rule of `score.lowest_k` for a batch, k taken as `as_fraction` takes it."""
    n_sel = np.maximum(1, (lengths * as_fraction(k)).astype(np.int64))  # the float product truncated, as `int(n * k)`
    return np.arange(width)[None, :] < n_sel[:, None], n_sel


def first_occurrences_batch(token_ids: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(b, width) mask of the first occurrence of each distinct id in each row (as `dc_pdd.first_occurrences`).

    Each row sorts the keys id·width + position (distinct, so any sort gives the order a stable sort of the ids
    would: equal ids by position), half the time of a stable argsort; ids outside [-1, 2^63 / width) take the argsort.
    """
    width = token_ids.shape[1]
    if width and -1 <= token_ids.min() and token_ids.max() < np.iinfo(np.int64).max // width - 1:
        keys = np.sort(token_ids * width + np.arange(width), axis=1)
        ranked = keys // width  # floor division: a padding id of -1 stays -1
        order = keys - ranked * width
    else:
        order = np.argsort(token_ids, axis=1, kind="stable")  # equal ids keep their positions' order
        ranked = np.take_along_axis(token_ids, order, axis=1)
    new = np.ones(ranked.shape, bool)
    new[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    first = np.zeros(ranked.shape, bool)
    np.put_along_axis(first, order, new, axis=1)
    return first & valid

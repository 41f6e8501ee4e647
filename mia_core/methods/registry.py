"""The method registry: one decorator next to each method, read by `score_texts`, the CLI and pages.

Every method maps `TokenStats` (plus whatever else it `needs`) to a `Score` whose value is
oriented **higher = more likely a member** (METHODS.md, "Orientation").
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..token_stats import TokenStats

#: What a method may need beyond the target's statistics, and what supplies it.
NEEDS = {
    "stats": "per-token statistics of the target model (one forward pass)",
    "lowercase_stats": "a second pass of the target model on the lowercased text",
    "ref_stats": "statistics of the text under a reference model (`ref_model=`)",
    "freq": "a token-frequency table of a reference corpus (`freq=`)",
    "lm": "further passes of the target model itself (`lm=`)",
    "classifier": "a classifier fitted on labelled member/non-member data (`classifier=`)",
}

#: What access to the model a method needs, in words for the method lists (issue: heavy methods).
ACCESS = ("target log-probs", "full logits", "extra model", "gradients", "labelled training data")


@dataclass(frozen=True)
class Score:
    """A sequence score and its per-token explanation.

    value : sequence score, higher = member.
    token_scores : (n_scored,) per-token scores aligned with `TokenStats.token_ids`.
    selected : (n_scored,) bool, the tokens that entered `value` (min-k% selection, first occurrences…).
    details : what else a method wants to show (e.g. the neighbour texts of `neighbor`); plain
        JSON-able values; a list of dicts is drawn as a table by the dashboard.
    """

    value: float
    token_scores: np.ndarray
    selected: np.ndarray
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NoParams:
    """Methods without tunable parameters."""


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its scorer, parameter dataclass, inputs and labels for people."""

    name: str
    fn: Callable[..., Score]
    params: type
    needs: tuple[str, ...]
    label: str
    summary: str
    token_level: bool
    access: tuple[str, ...] = ("full logits",)
    cost: str = "1 forward pass"

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.params))

    def make_params(self, **values: Any):
        """Build the parameter dataclass, rejecting names the method does not take."""
        unknown = set(values) - set(self.param_names)
        if unknown:
            raise TypeError(f"method {self.name!r} takes parameters {self.param_names} (got {sorted(unknown)})")
        return self.params(**values)


METHODS: dict[str, MethodSpec] = {}


def register(name: str, *, label: str, summary: str, params: type = NoParams,
             needs: tuple[str, ...] = ("stats",), token_level: bool = True,
             access: tuple[str, ...] = ("full logits",), cost: str = "1 forward pass"):
    """Decorator adding a scorer `fn(stats, params, **inputs) -> Score` to `METHODS`.

    `access` names what the method needs from the model (words from `ACCESS`); `cost` is its
    relative cost in forward/backward passes, shown next to it in method lists.
    """
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown needs {sorted(unknown)}; known: {sorted(NEEDS)}")
    bad_access = set(access) - set(ACCESS)
    if bad_access:
        raise ValueError(f"unknown access {sorted(bad_access)}; known: {ACCESS}")

    def wrap(fn: Callable[..., Score]) -> Callable[..., Score]:
        METHODS[name] = MethodSpec(name, fn, params, needs, label, summary, token_level, tuple(access), cost)
        return fn

    return wrap


def stats_only_methods() -> list[str]:
    """Methods that need nothing but the target's statistics (cheap to redraw; usable per snippet, chunk or window)."""
    return [name for name, spec in METHODS.items() if spec.needs == ("stats",)]


def get_method(name: str) -> MethodSpec:
    """The registered method, or a KeyError listing the available names."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; available: {', '.join(sorted(METHODS))}") from None


def require_tokens(stats: TokenStats) -> None:
    """Empty texts are an error with a clear message, never a NaN score."""
    if stats.n_scored == 0:
        preview = stats.text[:40] + ("…" if len(stats.text) > 40 else "")
        raise ValueError(f"no token to score in text {preview!r}: the text is empty (or a single token with bos='none')")


def check_k(k: float) -> None:
    """k is a fraction of the scored tokens."""
    if not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1] (got {k})")


def lowest_k(token_scores: np.ndarray, k: float) -> Score:
    """Mean of the `max(1, floor(k·n))` lowest token scores (stable ascending sort), with the mask.

    `int(n * k)` is the reference code's rounding, floating-point artefacts included (k = 0.29,
    n = 100 selects 28); only its NaN for a zero selection differs.
    """
    check_k(k)
    n = token_scores.shape[0]
    n_sel = max(1, int(n * k))
    chosen = np.argsort(token_scores, kind="stable")[:n_sel]
    selected = np.zeros(n, dtype=bool)
    selected[chosen] = True
    value = float(np.mean(token_scores[chosen], dtype=np.float64))
    return Score(value, token_scores, selected)


def mean_of_all(token_scores: np.ndarray) -> Score:
    """Mean over every token (loss-style methods)."""
    return Score(float(np.mean(token_scores, dtype=np.float64)), token_scores, np.ones(token_scores.shape[0], bool))

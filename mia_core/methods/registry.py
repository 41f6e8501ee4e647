"""The method registry: everything the project knows about a method, declared once where it is registered.

Every method maps `TokenStats` (plus whatever else it `needs`) to a `Score` whose value is
oriented **higher = more likely a member** (docs/methods.md, "Orientation"). Pages, the CLI,
reports and tests ask the registry (`methods_for`, `get_method`); none keeps a table of its own.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..model.token_stats import TokenStats
from ..names import unknown_name

#: What a method may need beyond the target's statistics, and what supplies it.
NEEDS = {
    "stats": "per-token statistics of the target model (one forward pass)",
    "lowercase_stats": "a second pass of the target model on the lowercased text",
    "ref_stats": "statistics of the text under a reference model (`ref_model=`)",
    "freq": "a token-frequency table of a reference corpus (`freq=`)",
    "lm": "further passes of the target model itself (`lm=`)",
    "classifier": "a classifier fitted on labelled member/non-member data (`classifier=`)",
    "shots_nonmembers": "known non-member texts put in front of the text as a prefix (`shots_nonmembers=`; never "
                        "scored texts)",
    "shots_members": "known member texts put in front of the text as a second prefix (`shots_members=`; never "
                     "scored texts)",
    "reference": "a reference population of known non-members of the same kind (`reference=`; never scored texts)",
}

#: Needs met by helper texts: known members or non-members a method uses as context or as a reference.
HELPER_NEEDS = ("shots_nonmembers", "shots_members", "reference")

#: What access to the model a method needs, in words for the method lists (issue: heavy methods).
ACCESS = ("target log-probs", "full logits", "extra model", "gradients", "labelled training data", "sampled text",
          "known non-members", "known members")


@dataclass(frozen=True)
class Score:
    """A sequence score and its per-token explanation.

    value : sequence score, higher = member.
    token_scores : (n_scored,) per-token scores aligned with `TokenStats.token_ids`.
    selected : (n_scored,) bool, the tokens that entered `value` (min-k% selection, first occurrences…).
    details : what else a method wants to show (e.g. the neighbour texts of `neighbor`); plain
        JSON-able values; a list of dicts is drawn as a table by the dashboard.
    k : the fraction `selected` was drawn with when `value` is the min-k% mean of `token_scores`
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


@dataclass(frozen=True)
class NoParams:
    """Methods without tunable parameters."""


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its scorer and parameters, what it needs, and how people are shown it.

    centre : the natural zero of its token scores, where the heatmap's diverging colours meet
        (None: the midpoint of the 5th–95th percentiles of the text's token scores).
    reading : value → one plain-language sentence on a sequence score (no caveat; `reading` adds it).
    formula, idea : the LaTeX formula and the one-line intuition shown on the Learn page.
    prepare : optional batched hook `prepare(stats_list, params, **inputs)` run once over all
        texts before they are scored one by one (e.g. GDS computes every text's gradients in batches).
    token_range : (low, high) of its token scores on the heatmap's fixed scale, so the same token score gets the
        same colour in every text (None: no fixed range; the heatmap scales on the text or a reference set).
        FIXED RANGES, from 60 demo-wiki texts under SmolLM2-135M (5th / 50th / 95th percentiles):
        log p (loss, zlib, min_k, surp, tag_tab, pac, camia) −9.0 / −1.9 / −0.01 → (−6, 0): its midpoint −3 nats
        (p ≈ 5%) is about a small model's mean token loss on prose, so red = likelier than a typical token, and
        tokens below −6 (p < 0.25%, the rare surprises) saturate blue. Min-K%++ z −2.6 / 0.19 / 0.88 → (−3, 1)
        around 0: z is bounded above in practice (99th percentile 1.1), its long tail is below. Gap-K% ≤ 0
        (−3.3 / −0.29 / 0) → (−4, 0): 0 = the top guess was right. ReCaLL's per-token change of log p after the
        prefix → (−2, 2) around 0 (a change of e² in probability saturates).
    """

    name: str
    fn: Callable[..., Score]
    params: type
    needs: tuple[str, ...]
    label: str
    summary: str
    token_level: bool
    access: tuple[str, ...]
    cost: str
    centre: float | None
    reading: Callable[[float], str]
    formula: str
    idea: str
    prepare: Callable[..., None] | None = None
    token_range: tuple[float, float] | None = None

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.params))

    @property
    def stats_only(self) -> bool:
        """Needs nothing but the target's statistics (cheap to redraw; usable per snippet, chunk or window)."""
        return self.needs == ("stats",)

    def make_params(self, **values: Any):
        """Build the parameter dataclass (which validates itself), rejecting names the method does not take."""
        unknown = set(values) - set(self.param_names)
        if unknown:
            raise TypeError(f"method {self.name!r} takes parameters {self.param_names} (got {sorted(unknown)})")
        return self.params(**values)


METHODS: dict[str, MethodSpec] = {}


def register(name: str, *, label: str, summary: str, centre: float | None, reading: Callable[[float], str],
             formula: str, idea: str, params: type = NoParams, needs: tuple[str, ...] = ("stats",),
             token_level: bool = True, access: tuple[str, ...] = ("full logits",), cost: str = "1 forward pass",
             prepare: Callable[..., None] | None = None, token_range: tuple[float, float] | None = None):
    """Decorator adding a scorer `fn(stats, params, **inputs) -> Score` to `METHODS`, with all it declares.

    `access` names what the method needs from the model (words from `ACCESS`); `cost` is its
    relative cost in forward/backward passes, shown next to it in method lists. `centre`, `reading`,
    `formula` and `idea` have no default: a method is registered whole or not at all.
    """
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown needs {sorted(unknown)}; known: {sorted(NEEDS)}")
    bad_access = set(access) - set(ACCESS)
    if bad_access:
        raise ValueError(f"unknown access {sorted(bad_access)}; known: {ACCESS}")
    if not (formula.strip() and idea.strip() and callable(reading)):
        raise ValueError(f"method {name!r} needs a formula, an idea and a reading")

    def wrap(fn: Callable[..., Score]) -> Callable[..., Score]:
        METHODS[name] = MethodSpec(name, fn, params, tuple(needs), label, summary, token_level, tuple(access), cost,
                                   centre, reading, formula, idea, prepare, token_range)
        return fn

    return wrap


def methods_for(available: tuple[str, ...] | set[str] = tuple(NEEDS), *, token_level: bool | None = None) -> list[str]:
    """Registered methods whose needs are all in `available` (e.g. `("stats",)`: one pass of the target suffices)."""
    return [name for name, spec in METHODS.items()
            if set(spec.needs) <= set(available) and (token_level is None or spec.token_level == token_level)]


def stats_only_methods() -> list[str]:
    """Methods that need nothing but the target's statistics (cheap to redraw; usable per snippet, chunk or window)."""
    return methods_for(("stats",))


def get_method(name: str) -> MethodSpec:
    """The registered method, or a KeyError naming the closest ones and listing the available names."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(unknown_name("method", name, sorted(METHODS))) from None


def reading(name: str, value: float) -> str:
    """One sentence on a sequence score, ending with the caveat that matters: compare, don't conclude."""
    base = get_method(name).reading(value)
    return (f"{base[0].upper()}{base[1:]} Higher = more member-like; on its own a score is not evidence — "
            "compare it with texts of known membership.")


def require_tokens(stats: TokenStats) -> None:
    """Empty texts are an error with a clear message, never a NaN score."""
    if stats.n_scored == 0:
        preview = stats.text[:40] + ("…" if len(stats.text) > 40 else "")
        raise ValueError(f"no token to score in text {preview!r}: the text is empty (or a single token with bos='none')")


def is_int(value) -> bool:
    """An integer that is not a bool (True would otherwise count as 1): parameter checks share it."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_k(k: float) -> None:
    """k is a fraction of the scored tokens."""
    if isinstance(k, bool) or not isinstance(k, (int, float, np.floating, np.integer)) or not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1] (got {k})")


@dataclass(frozen=True)
class KParams:
    """Parameters of a method that averages the lowest k% of its token scores (k validated here, once)."""

    k: float = 0.2
    """Fraction of tokens (lowest scores) averaged; n = max(1, floor(k · n_scored))."""

    def __post_init__(self) -> None:
        check_k(self.k)


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
    return Score(value, token_scores, selected, k=k)


def mean_of_all(token_scores: np.ndarray) -> Score:
    """Mean over every token (loss-style methods)."""
    return Score(float(np.mean(token_scores, dtype=np.float64)), token_scores, np.ones(token_scores.shape[0], bool))

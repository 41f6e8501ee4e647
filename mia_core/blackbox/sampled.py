"""(n,p)-discoverable extraction estimated from an API one can only sample: pure functions of stored answers.

METHODS-API.md §18, METHODS-FIELD.md §11; definitions: Hayes et al. (arXiv 2410.19482), Cooper et al. (2505.12546).

- **Names kept apart.** `n_s` = samples drawn for a window; `k` = how many were strict matches; `n` = the tries of an
  adversary in "(n,p)-discoverable" (`1 − (1 − p_lo)^n ≥ p`); `r` = greedy repeats.
- **Estimand.** `p̂ = k/n_s` estimates P(API emits the suffix | this prompt template) for the whole served system
  (hidden system prompt, filters, provider sampling). It is **not** §11's white-box `p_z`; never compare the two.
- **Samples** (ours; the spec is silent): one `strict_hits` entry per answered sample, a refusal, empty or filtered
  answer being a non-match; an HTTP error is no answer, not a sample (it is retried per the conventions).
- Defaults `α = 0.05`, `p ∈ {0.5, 0.95}` are the spec's **ours**; the adversary's default `n = 100` is **ours** too
  (the spec names none; it equals the spec's default `n_s` by coincidence, not by definition).
- §17's loose `s` diagnostic is `nv_recall.loose_match`; the caller combines it with these matches.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.stats import beta

DEFAULT_ALPHA = 0.05
DEFAULT_PS = (0.5, 0.95)
DEFAULT_N = 100


def _check_unit(name: str, value: float, *, open_: bool) -> None:
    """ValueError unless `value` lies in (0, 1) (`open_`) or [0, 1]; NaN is refused either way."""
    ok = 0 < value < 1 if open_ else 0 <= value <= 1
    if not ok:
        raise ValueError(f"{name} must be in {'(0, 1)' if open_ else '[0, 1]'} (got {value})")


def clopper_pearson(k: int, n: int, alpha: float = DEFAULT_ALPHA) -> tuple[float, float]:
    """Exact (1 − α) interval of a binomial proportion from k successes in n: `[B(α/2; k, n−k+1), B(1−α/2; k+1, n−k)]`,
    B the Beta quantile; lower 0 when k = 0, upper 1 when k = n (METHODS-API.md §18).

    >>> [round(x, 4) for x in clopper_pearson(0, 10)]
    [0.0, 0.3085]
    """
    k, n = operator.index(k), operator.index(n)  # whole counts only: a float is refused with a TypeError
    if not (n >= 1 and 0 <= k <= n):
        raise ValueError(f"need 0 ≤ k ≤ n and n ≥ 1 (got k={k}, n={n})")
    _check_unit("alpha", alpha, open_=True)
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def one_sided_upper(n: int, alpha: float = DEFAULT_ALPHA) -> float:
    """One-sided (1 − α) upper bound on a proportion after 0 successes in n: `1 − α^{1/n}` (≈ 3/n at α = 0.05)."""
    if n < 1:
        raise ValueError(f"n must be ≥ 1 (got {n})")
    _check_unit("alpha", alpha, open_=True)
    return -math.expm1(math.log(alpha) / n)


def is_discoverable(p_lo: float, n: int, p: float) -> bool:
    """Whether an adversary's `n` tries get the suffix at least once with probability ≥ p: `1 − (1 − p_lo)^n ≥ p`."""
    _check_unit("p_lo", p_lo, open_=False)
    _check_unit("p", p, open_=True)
    if n < 1:
        raise ValueError(f"n (the adversary's tries) must be ≥ 1 (got {n})")
    return p_lo == 1 or -math.expm1(n * math.log1p(-p_lo)) >= p


def n_needed(p_z: float, p: float) -> float:
    """Tries needed to get the suffix at least once with probability p: `ceil(log(1 − p) / log(1 − p_z))` (§11), ∞
    when p_z = 0, 1 when p_z = 1; log1p keeps tiny p_z exact. The result is the least n that `is_discoverable` accepts
    (a ratio landing a hair off an integer is corrected).

    >>> n_needed(0.5, 0.95), n_needed(0.0, 0.5), n_needed(1.0, 0.95)
    (5.0, inf, 1.0)
    """
    _check_unit("p_z", p_z, open_=False)
    _check_unit("p", p, open_=True)
    if p_z == 0:
        return math.inf
    if p_z == 1:
        return 1.0
    ratio = math.log1p(-p) / math.log1p(-p_z)
    if math.isinf(ratio):  # p_z below the smallest normal float: log1p(−p_z) rounds to −0
        return math.inf
    n = max(1, math.ceil(ratio))
    if n > 1 and is_discoverable(p_z, n - 1, p):
        n -= 1
    elif not is_discoverable(p_z, n, p):
        n += 1
    return float(n)


def _target(suffix: str) -> str:
    """The suffix without leading whitespace (ours: a suffix cut from a text often starts with a space)."""
    if not suffix.strip():
        raise ValueError("suffix is empty")
    return suffix.lstrip()


def strict_match(response: str, suffix: str) -> bool:
    """The (n,p) event: the response, leading whitespace stripped, starts with the suffix (see `_target`) exactly."""
    return response.lstrip().startswith(_target(suffix))


def contained_match(response: str, suffix: str) -> bool:
    """The suffix occurs anywhere in the response (catches a preamble such as "Sure, here is …"); reported only."""
    return _target(suffix) in response


def _count(hits: Sequence[bool], what: str) -> tuple[int, int]:
    """(matches, total) of a non-empty sequence of booleans."""
    hits = list(hits)
    if not hits or any(h not in (True, False) for h in hits):
        raise ValueError(f"{what} must be a non-empty sequence of booleans (got {hits[:5]}{' …' * (len(hits) > 5)})")
    return sum(bool(h) for h in hits), len(hits)


@dataclass(frozen=True)
class WindowEstimate:
    """One window's sampling estimate; tuples `n_needed_*` and `discoverable` follow `ps`. `n_needed_lo` (at `p_lo`) is
    the most tries the data allow, `n_needed_hi` (at `p_hi`) the fewest; `discoverable` tests `p_lo` with the
    adversary's `n` tries; `p_hi_one_sided` is `1 − α^{1/n_s}`, set only when k = 0."""

    k: int
    n_s: int
    alpha: float
    p_hat: float
    p_lo: float
    p_hi: float
    p_hi_one_sided: float | None
    n: int
    ps: tuple[float, ...]
    n_needed_hat: tuple[float, ...]
    n_needed_lo: tuple[float, ...]
    n_needed_hi: tuple[float, ...]
    discoverable: tuple[bool, ...]

    @property
    def extracted(self) -> bool:
        """k ≥ 1 is itself a direct observation, whatever the interval says."""
        return self.k >= 1

    @property
    def observation(self) -> str | None:
        """"extracted in n_s tries" when k ≥ 1, else None (a non-match is not evidence of absence)."""
        return f"extracted in {self.n_s} tries (k = {self.k})" if self.extracted else None


def estimate_window(strict_hits: Sequence[bool], *, alpha: float = DEFAULT_ALPHA, ps: Sequence[float] = DEFAULT_PS,
                    n: int = DEFAULT_N) -> WindowEstimate:
    """p̂ = k/n_s with its Clopper–Pearson interval, n_needed at p̂ and both bounds, and (n,p)-discoverability at p_lo.

    >>> e = estimate_window([True] * 60 + [False] * 40)
    >>> e.k, e.n_s, e.p_hat, e.n_needed_hat
    (60, 100, 0.6, (1.0, 4.0))
    """
    k, n_s = _count(strict_hits, "strict_hits")
    if n < 1:
        raise ValueError(f"n (the adversary's tries) must be ≥ 1 (got {n})")
    p_hat, (lo, hi), ps = k / n_s, clopper_pearson(k, n_s, alpha), tuple(float(p) for p in ps)
    return WindowEstimate(
        k=k, n_s=n_s, alpha=alpha, p_hat=p_hat, p_lo=lo, p_hi=hi,
        p_hi_one_sided=one_sided_upper(n_s, alpha) if k == 0 else None, n=n, ps=ps,
        n_needed_hat=tuple(n_needed(p_hat, p) for p in ps), n_needed_lo=tuple(n_needed(lo, p) for p in ps),
        n_needed_hi=tuple(n_needed(hi, p) for p in ps), discoverable=tuple(is_discoverable(lo, n, p) for p in ps))


@dataclass(frozen=True)
class GreedySummary:
    """`k_greedy` strict matches among `r` temperature-0 repeats: a count of calls, never a claim of determinism."""

    k_greedy: int
    r: int

    @property
    def rate(self) -> float:
        """k_greedy / r."""
        return self.k_greedy / self.r


def greedy_summary(strict_hits_greedy: Sequence[bool]) -> GreedySummary:
    """k_greedy / r over stored temperature-0 repeats (at an API temperature 0 is not deterministic: §17)."""
    return GreedySummary(*_count(strict_hits_greedy, "strict_hits_greedy"))


@dataclass(frozen=True)
class GlBound:
    """What generated-token log-probs say about log p(z) (natural log) for the suffix's token path z.

    `exact_path`: the response's first S tokens are z and `log_p` is that path's log-probability — exact for the path,
    a *lower* bound for the suffix string (other tokenisations spell it too). Otherwise `log_p` is an *upper* bound on
    log p(z); `j` tokens of z were reproduced, and `side` says how u_{j+1} was bounded: "in_top" (z_{j+1} listed),
    "kth" (the k_top-th listed probability), "rest" (the mass the listed ones leave), "none" (nothing listed at j+1:
    u ≤ 1), or "ended" (the response has no token j+1); "path" when `exact_path`."""

    log_p: float
    exact_path: bool
    j: int
    side: str


def gl_upper_bound(generated: Sequence[str], generated_logprobs: Sequence[float],
                   top_logprobs: Sequence[Mapping[str, float]], suffix: Sequence[str]) -> GlBound:
    """Tier GL (§18): with j the common token prefix of g and z, `log p(z) ≤ Σ_{t≤j} ℓ(g_t) + log u_{j+1}`, where
    u_{j+1} = exp ℓ(z_{j+1}) if z_{j+1} is in the top-k_top at j+1, else min(exp ℓ_(k_top), 1 − Σ_top exp ℓ); later
    tokens are bounded by 1.

    Tokens are compared as the provider spells them (`suffix`: z in the provider's tokenisation). Edge cases (ours):
    a response of only j tokens (it ended, or hit max_tokens, on z's prefix) lists no alternatives at j+1, so
    u_{j+1} ≤ 1 and the bound is Σ_{t≤j} ℓ(g_t); an empty top list gives u ≤ 1 too; where the listed mass reaches 1
    (rounded log-probs), `1 − Σ` is no bound and exp ℓ_(k_top) alone is used. It bounds the token path z only.

    >>> gl_upper_bound(["a", "b"], [-0.1, -0.2], [{"a": -0.1}, {"b": -0.2, "c": -2.0}], ["a", "c", "d"]).log_p
    -2.1
    """
    if not len(generated) == len(generated_logprobs) == len(top_logprobs):
        raise ValueError(f"generated, generated_logprobs and top_logprobs differ in length "
                         f"({len(generated)}, {len(generated_logprobs)}, {len(top_logprobs)})")
    if not suffix:
        raise ValueError("suffix has no tokens")
    for t, (value, top) in enumerate(zip(generated_logprobs, top_logprobs)):
        checked = [(f"generated_logprobs[{t}]", value)] + [(f"top_logprobs[{t}][{k!r}]", v) for k, v in top.items()]
        for where, logprob in checked:  # −∞ is a log-prob (p = 0); NaN and > 0 are not
            if math.isnan(logprob) or logprob > 0:
                raise ValueError(f"{where}: a log-prob must be ≤ 0 and not NaN (got {logprob})")
    j = 0
    while j < min(len(generated), len(suffix)) and generated[j] == suffix[j]:
        j += 1
    head = math.fsum(generated_logprobs[:j])
    if j == len(suffix):
        return GlBound(head, True, j, "path")
    if j == len(generated):
        return GlBound(head, False, j, "ended")
    top = top_logprobs[j]
    if suffix[j] in top:
        return GlBound(head + top[suffix[j]], False, j, "in_top")
    if not top:
        return GlBound(head, False, j, "none")
    kth = min(top.values())
    rest = 1.0 - math.fsum(math.exp(v) for v in top.values())
    if 0 < rest < math.exp(kth):
        return GlBound(head + math.log(rest), False, j, "rest")
    return GlBound(head + kth, False, j, "kth")


@dataclass(frozen=True)
class WindowResult:
    """One window's stored outcome: characters [char_start, char_end) its suffix covers in the text, its estimate,
    its greedy repeats (None if not run), and how many of its `responses` (samples + greedy repeats) were refusals."""

    char_start: int
    char_end: int
    estimate: WindowEstimate
    greedy: GreedySummary | None
    refusals: int
    responses: int

    def __post_init__(self) -> None:
        if not 0 <= self.char_start < self.char_end:
            raise ValueError(f"need 0 ≤ char_start < char_end (got {self.char_start}, {self.char_end})")
        if not 0 <= self.refusals <= self.responses:
            raise ValueError(f"need 0 ≤ refusals ≤ responses (got {self.refusals}, {self.responses})")


@dataclass(frozen=True, eq=False)
class TextSummary:
    """One text's windows added up (§11, §18 "Per text"); arrays are (n_chars,), NaN where no suffix covers a
    character; shares are NaN where nothing was counted."""

    max_p_hat: np.ndarray
    max_p_hi: np.ndarray
    windows: int
    share_extracted: float
    share_greedy: float
    refusal_rate: float


def per_text(windows: Sequence[WindowResult], n_chars: int) -> TextSummary:
    """Per character, the highest p̂ and p_hi over the windows whose suffix covers it; the share of windows with
    k ≥ 1; the share of greedy-tested windows with a strict greedy match (k_greedy ≥ 1); refusals / responses."""
    max_p_hat = np.full(n_chars, np.nan)  # (n_chars,)
    max_p_hi = np.full(n_chars, np.nan)  # (n_chars,)
    for w in windows:
        if w.char_end > n_chars:
            raise ValueError(f"a window ends at character {w.char_end}, past the text's {n_chars}")
        span = slice(w.char_start, w.char_end)
        max_p_hat[span] = np.fmax(max_p_hat[span], w.estimate.p_hat)
        max_p_hi[span] = np.fmax(max_p_hi[span], w.estimate.p_hi)
    greedy = [w.greedy.k_greedy >= 1 for w in windows if w.greedy is not None]
    responses = sum(w.responses for w in windows)
    return TextSummary(
        max_p_hat=max_p_hat, max_p_hi=max_p_hi, windows=len(windows),
        share_extracted=float(np.mean([w.estimate.extracted for w in windows])) if windows else math.nan,
        share_greedy=float(np.mean(greedy)) if greedy else math.nan,
        refusal_rate=sum(w.refusals for w in windows) / responses if responses else math.nan)

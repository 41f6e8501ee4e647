"""CAMIA, context-aware membership inference (Chang et al., arXiv 2409.13745, EMNLP 2025): single-pass signals.

Membership shows in how the per-token loss evolves with context. Twelve signals of the shared pass,
each oriented higher = member a priori, are calibrated against a reference population of known
non-members (`reference=`; never scored texts) and their p-values combined:
S1 the mean log-prob of the first C tokens; S2 that mean over the share of distinct tokens
("calibrated loss"); S3 the share of the first 200 tokens with ℓ ≥ τ; S4 the share of positions whose
log-prob beats the mean of those before it (orientation unconfirmed), for C ∈ {all, 200, 300} and
τ ∈ {−1, −2, −3}. `p_f(x) = percentileofscore(−f(R), −f(x), kind="rank") / 100`; the default score is
`1 − mean_f p_f`, the alternatives combine them with scipy's `combine_pvalues` and score `−p`.

Deviations from the authors' code (docs/methods.md, "camia"): the orientation is fixed a priori (they
flip each signal by comparing the labelled classes' means, which leaks labels); the "all" cut-off keeps
the last token; the repetition signals (a second pass on the text repeated six times), Lempel–Ziv
complexity, approximate entropy and the supervised logistic-regression variant are left out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..api import LOGP, LOGP_RANGE, AccessNeeds, Paper, Score, TokenStats, TokenView, param, register, require_tokens
from ..deferred import deferred
from .helper_texts import ReferenceStats

if TYPE_CHECKING:  # scipy.stats takes a second to import: it loads when a text is scored, not with the registry
    from scipy import stats as scipy_stats
else:
    scipy_stats = deferred("scipy.stats")

CUTOFFS = (None, 200, 300)
THRESHOLDS = (-1.0, -2.0, -3.0)
#: Tokens S3 looks at (the authors: the first 200).
S3_TOKENS = 200
AGGREGATES = ("mean", "fisher", "pearson", "mudholkar_george")
#: p-values are clipped into [P_FLOOR, 1 − P_FLOOR] before a scipy combination (log(0) is −inf).
P_FLOOR = 1e-10
#: Fewer reference texts than this gives coarse p-values: the score says so.
MIN_REFERENCE = 20


def signal_names() -> list[str]:
    """Names of the twelve signals, in the order `signals` returns them."""
    cut = ["all" if c is None else str(c) for c in CUTOFFS]
    return ([f"S1_mean_logprob_{c}" for c in cut] + [f"S2_calibrated_{c}" for c in cut]
            + [f"S3_share_above_{t:g}" for t in THRESHOLDS] + [f"S4_beats_running_mean_{c}" for c in cut])


def signals(logprob: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """The twelve signals of one text (float64; S4 is NaN for fewer than 2 tokens)."""
    lp = np.asarray(logprob, dtype=np.float64)
    n = lp.size
    out = []
    for c in CUTOFFS:
        out.append(lp[: c or n].mean())
    for c in CUTOFFS:
        ids = token_ids[: c or n]
        out.append(lp[: c or n].mean() / (np.unique(ids).size / ids.size))
    head = lp[:S3_TOKENS]
    out += [float(np.mean(head >= tau)) for tau in THRESHOLDS]
    for c in CUTOFFS:
        part = lp[: c or n]
        if part.size < 2:
            out.append(np.nan)
            continue
        running = np.cumsum(part)[:-1] / np.arange(1, part.size)  # mean of ℓ_1..ℓ_{t−1} for t = 2…
        out.append(float(np.mean(part[1:] > running)))
    return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True)
class CamiaParams:
    aggregate: str = param("mean", 'how the signals\' p-values combine: "mean" (score 1 − mean p) or a scipy method '
                           "(score −p)", choices=AGGREGATES)

    def __post_init__(self) -> None:
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES} (got {self.aggregate!r})")


def reference_signals(reference: ReferenceStats) -> np.ndarray:
    """(|R|, 12) signals of the reference population."""
    return np.stack([signals(s.logprob, s.token_ids) for s in reference.stats if s.n_scored > 0])


def prepare(stats: list[TokenStats], params: "CamiaParams", *, reference: ReferenceStats) -> list[np.ndarray]:
    """The population's signals, computed once per scoring call: every text's context."""
    population = reference_signals(reference)
    return [population] * len(stats)


def p_values(values: np.ndarray, population: np.ndarray) -> np.ndarray:
    """Per signal, the share of the population at or above the text's value (ties half), NaN where undefined."""
    out = np.full(values.shape, np.nan)
    for j, v in enumerate(values):
        column = population[:, j][~np.isnan(population[:, j])]
        if not np.isnan(v) and column.size:
            out[j] = scipy_stats.percentileofscore(-column, -v, kind="rank") / 100.0
    return out


@register("camia", access=AccessNeeds(),
          lesson=430, paper=Paper("Chang et al.", 2025, "https://arxiv.org/abs/2409.13745",
                                  "Context-Aware Membership Inference Attacks against Pre-trained Large Language Models",
                                  "EMNLP 2025"),
          fails=("It needs a reference population of known non-members of the same kind (its p-values are coarse below "
                 "20 texts); the authors orient each signal by comparing labelled members and non-members, which leaks "
                 "labels (METHODS-FIELD.md §6)."),
          view=TokenView(LOGP,
                         "the first tokens, which the threshold signals read; the score compares twelve signals with "
                         "the reference population (table below)",
                         token_range=LOGP_RANGE),
          label="CAMIA (single-pass)", params=CamiaParams, needs=("stats", "reference"), prepare=prepare,
          cost="1 forward pass (and one per reference text, once)",
          reading=lambda v: f"across twelve loss-dynamics signals the text sits, on average, above {v:.0%} of "
                            "the known non-members (mean aggregate); members show lower loss that falls faster "
                            "with context.",
          formula=r"\mathrm{score}(x) = 1 - \frac{1}{|F|}\sum_{f\in F} p_f(x),\ "
                  r"p_f(x) = \Pr_{r \in R}\big[f(r) \geq f(x)\big]",
          idea="Members show in how the loss evolves along the text; each signal is calibrated against known "
               "non-members and the p-values are combined.",
          summary="Twelve single-pass loss-dynamics signals, each turned into a p-value against known non-members; "
                  "score = 1 − their mean.")
def camia(stats: TokenStats, params: CamiaParams, *, reference: ReferenceStats, context: np.ndarray) -> Score:
    """Combine the text's signal p-values against the reference population's signals (`context`; higher = member)."""
    require_tokens(stats)
    if reference.bos_policy != stats.bos_policy:
        raise ValueError("the reference population was scored under another BOS policy than the text")
    values = signals(stats.logprob, stats.token_ids)
    p = p_values(values, context)
    kept = ~np.isnan(p)
    if params.aggregate == "mean":
        value = 1.0 - float(p[kept].mean())
    else:
        value = -float(scipy_stats.combine_pvalues(np.clip(p[kept], P_FLOOR, 1 - P_FLOOR), method=params.aggregate).pvalue)
    selected = np.zeros(stats.n_scored, dtype=bool)
    selected[:S3_TOKENS] = True
    details = {"signals": [{"signal": name, "value": float(v), "p_value": float(q)}
                           for name, v, q in zip(signal_names(), values, p) if not np.isnan(q)],
               "reference_size": len(reference.stats), "reference_source": reference.helpers.source}
    if len(reference.stats) < MIN_REFERENCE:
        details["warning"] = (f"only {len(reference.stats)} reference texts (fewer than {MIN_REFERENCE}): "
                              "the p-values are coarse")
    return Score(value, stats.logprob.astype(np.float64), selected, details)

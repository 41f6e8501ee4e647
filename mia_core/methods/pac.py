"""PAC, Polarized Augment Calibration (Ye et al., ACL Findings 2024, arXiv 2405.11930; docs/methods.md, "pac").

A member sits at a local optimum of the model: swapping a few of its words moves its log-prob
"polarization" more than a non-member's. With the scored log-probs ℓ_t (n of them), stable
ascending argsort, n_far = max(1, floor(0.05·n)) and n_loc = max(1, floor(0.3·n)):

    PD(z)  = mean of the n_far highest ℓ_t − mean of the n_loc lowest ℓ_t   (far = the sort's last n_far)
    PAC(x) = PD(x) − mean_j PD(x̃_j),     score = −PAC                       (higher = member)

The N copies x̃_j are EDA random swaps (`src/eda.py` of the authors): `words = x.split(' ')`,
n_swaps = max(1, floor(α·len(words))) swaps per copy, each of two uniform indices; the second is
drawn again while it equals the first, and when its first three draws all equal the first index the
swap is skipped; `' '.join(words)` is the copy. Copies go through the same `lm.token_stats` as the
text (same BOS and long-text policies, same disk cache); the `prepare` hook scores the copies of all
texts in one call and hands each text its copies' statistics as its context. A one-word text cannot be
swapped: x̃ = x, PAC = 0 and `details["unswappable"] = True`, with no extra pass.

Per-token output: ℓ_t; selected = far ∪ local, their indices in `details["far_tokens"]` and
`details["local_tokens"]`. `details` also holds PD(x), each copy with its PD, and the raw PAC.

Deviations from the authors' code (`yyy01/PAC` 79c6eca): they seed Python's global `random` once
at import (`random.seed(0)`), so a text's copies depend on the texts before it; we seed a
`random.Random` per text from (seed, sha256(text)), so a score does not depend on order or batching.
Within one text the draws are theirs (`randint`, and the loop's fourth draw before a skip is made
too), so the copies are those their `random_swap` makes from the same generator state. They
shuffle the copies, which does not change a mean; we keep them in draw order. They tokenize with
`tokenizer.encode` (our `bos="none"`); we follow the run's BOS policy. A truncated text
(`long_text="truncate"`) is augmented from the part its scores cover (`TokenStats.scored_text`),
so copies hold the same words as the scored tokens. Ports: SoK has no max(1, ·) (for n < 20 its far
region is the whole text) and lets padded positions (log-prob 0) into the far region; we copy neither.

Unconfirmed (METHODS-FIELD.md §3): the paper PDF could not be read; constants (α = 0.3, N = 5,
ratios 0.05 / 0.3) and the orientation are the authors' code's (`attack.py` ranks by −PAC).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..model.identity import text_sha256
from ..api import LOGP, LOGP_RANGE, AccessNeeds, Paper, Score, TokenStats, TokenView, is_int, param, register, require_tokens

if TYPE_CHECKING:  # annotations only: the registry is read without loading torch
    from ..model.language_model import LanguageModel

#: Share of the scored tokens in the far region (the highest log-probs), at least one.
RATIO_FAR = 0.05
#: Share of the scored tokens in the local region (the lowest log-probs), at least one.
RATIO_LOCAL = 0.3
#: Draws of a swap's second index that may equal the first before the swap is skipped (EDA).
MAX_EQUAL_DRAWS = 3


@dataclass(frozen=True)
class PacParams:
    """Parameters of PAC."""

    alpha: float = param(0.3, "share of the words swapped in each copy: max(1, floor(alpha · words)) swaps, alpha in "
                         "(0, 1]", low=0.05, high=1.0, step=0.05)
    n_augment: int = param(5, "number N of augmented copies per text (an integer ≥ 1; each costs one forward pass)",
                           low=1, high=20, step=1)  # high: the dashboard's bound (docs/security.md)
    seed: int = param(0, "seed of the word swaps; combined with each text's SHA-256, so copies do not depend on text "
                      "order", widget=False)

    def __post_init__(self) -> None:
        a = self.alpha
        if isinstance(a, bool) or not isinstance(a, (int, float, np.floating, np.integer)) or not 0 < a <= 1:
            raise ValueError(f"alpha must be in (0, 1] (got {a!r})")
        if not is_int(self.n_augment) or self.n_augment < 1:
            raise ValueError(f"n_augment must be an integer ≥ 1 (got {self.n_augment!r})")
        if not is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed must be an integer ≥ 0 (got {self.seed!r})")


def polarized_distance(logprob: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """(PD, far indices, local indices) of one text's log-probs (n ≥ 1): mean of the highest minus the lowest."""
    n = logprob.shape[0]
    n_far, n_loc = max(1, int(n * RATIO_FAR)), max(1, int(n * RATIO_LOCAL))
    order = np.argsort(logprob, kind="stable")  # ascending; ties keep text order
    far, local = order[n - n_far:], order[:n_loc]
    return float(np.mean(logprob[far]) - np.mean(logprob[local])), far, local


def _second_index(first: int, last: int, rng: random.Random) -> int | None:
    """A swap's partner index: redrawn while it equals `first`; None (skip) when three draws all equal it.

    The authors' loop draws a fourth time before it gives up; that draw is made too, so the random
    stream stays theirs.
    """
    for _ in range(MAX_EQUAL_DRAWS):
        j = rng.randint(0, last)
        if j != first:
            return j
    rng.randint(0, last)
    return None


def random_swap(words: list[str], n_swaps: int, rng: random.Random) -> list[str]:
    """A copy of `words` after `n_swaps` EDA swaps of two uniformly drawn positions (some may be skipped)."""
    out = list(words)
    last = len(out) - 1
    for _ in range(n_swaps):
        i = rng.randint(0, last)
        j = _second_index(i, last, rng)
        if j is not None:
            out[i], out[j] = out[j], out[i]
    return out


def augment(text: str, *, alpha: float, n_augment: int, seed: int, key: str | None = None) -> list[str]:
    """`n_augment` word-swapped copies of `text` (split on single spaces), from an RNG seeded by (seed, sha256(key)).

    `key` (default: `text`) is the text whose hash seeds the generator: the full text when only a
    truncated part of it is augmented.
    """
    words = text.split(" ")
    n_swaps = max(1, int(alpha * len(words)))
    rng = random.Random(f"{seed}:{text_sha256(text if key is None else key)}")
    return [" ".join(random_swap(words, n_swaps, rng)) for _ in range(n_augment)]


def _source(stats: TokenStats) -> str:
    """The text the copies are made from: what the scores cover (the kept prefix of a truncated text)."""
    return stats.scored_text


def _unswappable(stats: TokenStats) -> bool:
    """A text of one word (no single space) has no swap."""
    return len(_source(stats).split(" ")) < 2


def copies_of(stats: TokenStats, params: PacParams) -> list[str]:
    """The text's N augmented copies (N copies of the text itself when it has one word)."""
    if _unswappable(stats):
        return [_source(stats)] * int(params.n_augment)
    return augment(_source(stats), alpha=float(params.alpha), n_augment=int(params.n_augment), seed=int(params.seed),
                   key=stats.text)


def prepare(stats: list[TokenStats], params: PacParams, *, lm: LanguageModel) -> list[dict[str, TokenStats]]:
    """Every copy of every text through one `lm.token_stats` call per policy; each text's context maps its distinct
    copies to their statistics (empty for a text of one word, which has no swap)."""
    groups: dict[tuple, list[str]] = {}
    for st in stats:
        if not _unswappable(st):
            groups.setdefault(tuple(sorted(st.policies.items())), []).extend(copies_of(st, params))
    found: dict[tuple, TokenStats] = {}
    for policies, texts in groups.items():
        distinct = list(dict.fromkeys(texts))
        found.update(((policies, t), s) for t, s in zip(distinct, lm.token_stats(distinct, **dict(policies))))
    contexts = []
    for st in stats:
        policies = tuple(sorted(st.policies.items()))
        contexts.append({} if _unswappable(st) else {c: found[(policies, c)] for c in copies_of(st, params)})
    return contexts


def _reading(v: float) -> str:
    """One sentence on a PAC score (−PAC)."""
    change = "widens" if v >= 0 else "narrows"
    return (f"swapping words {change} the gap between this text's likeliest and least likely tokens by {abs(v):.2f} "
            "nats: a memorised text sits at a local optimum, so swaps disturb it more.")


@register("pac", access=AccessNeeds(further_passes=True, why="further passes on word-swapped copies of the text"),
          lesson=350, paper=Paper("Ye et al.", 2024, "https://arxiv.org/abs/2405.11930",
                                  "Data Contamination Calibration for Black-box LLMs", "Findings of ACL 2024"),
          fails=("A one-word text cannot be swapped (PAC = 0, flagged), and the swaps are random: the authors seed "
                 "once per run, so their scores depend on the order of the data set (METHODS-FIELD.md §3)."),
          view=TokenView(LOGP,
                         "the far region (the likeliest 5%, at the red end) and the local region (the least likely "
                         "30%, at the blue end), listed below; the score is how much word swaps widen their gap",
                         token_range=LOGP_RANGE),
          label="PAC", params=PacParams, needs=("stats", "lm"), token_level=True, prepare=prepare,
          reading=_reading,
          formula=r"\mathrm{PD}(z) = \overline{\ell}_{\text{top } 5\%}(z) - \overline{\ell}_{\text{bottom } 30\%}(z),\ "
                  r"\mathrm{score}(x) = \frac{1}{N}\sum_{j=1}^{N} \mathrm{PD}(\tilde x_j) - \mathrm{PD}(x),\ "
                  r"\tilde x_j = \text{word-swapped copies}",
          idea="A memorised text is a local optimum: swapping its words widens the gap between its likeliest and "
               "least likely tokens more than for an unseen text.", cost="1 + N forward passes (augmented copies)",
          extra_passes=lambda p: p.n_augment,
          summary="Polarized distance (top 5% minus bottom 30% log-probs) of word-swapped copies minus the text's "
                  "own: memorised text loses more by the swaps.")
def pac(stats: TokenStats, params: PacParams, *, lm: LanguageModel, context: dict[str, TokenStats]) -> Score:
    """Token score = `logprob`; sequence score = mean PD of the copies − PD of the text (= −PAC); `context` holds the
    copies' statistics (`prepare`)."""
    require_tokens(stats)
    own = stats.logprob.astype(np.float64)
    pd, far, local = polarized_distance(own)
    copies = copies_of(stats, params)
    unswappable = _unswappable(stats)
    if unswappable:  # x̃ = x: no pass needed, PAC = 0 exactly
        copy_pds = [pd] * len(copies)
    else:
        by_text = context  # repeats were scored once
        for s in by_text.values():
            require_tokens(s)
        copy_pds = [polarized_distance(by_text[c].logprob.astype(np.float64))[0] for c in copies]
    raw = 0.0 if unswappable else pd - float(np.mean(copy_pds))  # PAC; members have the lower one
    selected = np.zeros(stats.n_scored, dtype=bool)
    selected[far] = selected[local] = True
    details = {
        "pac": raw,
        "pd": pd,
        "pd_copies_mean": float(np.mean(copy_pds)),
        "unswappable": unswappable,
        "n_far": int(far.shape[0]),
        "n_local": int(local.shape[0]),
        "far_tokens": sorted(int(i) for i in far),
        "local_tokens": sorted(int(i) for i in local),
        "copies": [{"copy": c, "pd": float(v)} for c, v in zip(copies, copy_pds)],
    }
    return Score(-raw if raw else 0.0, own, selected, details)

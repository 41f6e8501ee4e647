"""EM-MIA (Kim et al., EACL 2026, arXiv 2410.07582; METHODS-FIELD.md §15, docs/methods.md "em_mia").

Transductive, with no labels: every scored text is also a one-text ReCaLL prefix of every other, giving the matrix
`R[p, x] = LL(x | p) / min(LL(x), −1e-12)` (`matrix.py`, on ReCaLL's cached-prefix kernel). Starting from an init
method's scores `m⁰` (default `loss`, recorded), each of T = 10 rounds sets pseudo-labels `y = [m > median(m)]`,
scores each prefix `f(p) = AUC(R[p, ·], y)` and sets `m = −f` (a good prefix is a non-member; higher = member already,
no further negation), as the authors' `emmia.py -m NegPref` (`gyuwankim/em-mia` c0ee78b). Every score depends on
the whole scored set.

Deviations (METHODS-FIELD.md §15): the diagonal R[p, p] is left out of f(p) (`mode="reference"` keeps it, as their
`keep_used=True`); conditioning is `F(p) + F(x)` scoring the shared pass's tokens (theirs: `tokenizer(p) +
tokenizer(x)`); a float32 log-softmax (theirs: fp16 logits); a prefix too long for the context is left-truncated and
flagged (they never check); a constant init is refused (theirs scores every text 0). The N² cost is bounded: more
than `max_texts` texts are refused unless each prefix is judged on a seeded sample of `sample_size` texts (N·K
passes; ours, not the authors'). **Unconfirmed**: which init the paper's headline numbers use.
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, get_method, is_int, param, register, require_tokens
from ...deferred import deferred
from ...model.identity import text_sha256

if TYPE_CHECKING:  # the engines (torch, scipy) load when a set is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import iteration, matrix
else:
    iteration = deferred(f"{__name__}.iteration")
    matrix = deferred(f"{__name__}.matrix")

INITS = ("loss", "zlib", "min_k", "min_k_pp")
PREFIX_SCORES = ("auc_roc", "kendall_tau", "rank_dist")
MODES = ("ours", "reference")
#: Below this many texts the median split is noisy: the scores say so.
MIN_SET = 50
TRANSDUCTIVE = ("transductive: this score depends on every text scored with it (no labels used); adding or removing "
                "texts changes all scores")


@dataclass(frozen=True)
class EmMiaParams:
    """Parameters of EM-MIA (the authors' defaults; the cap and the sample are ours)."""

    init: str = param("loss", "the method whose scores start the iteration (the authors' code runs loss, ref, zlib, "
                      "Min-K 20% and Min-K++ 20%)", choices=INITS)
    iterations: int = param(10, "rounds of the prefix-score / membership update (the authors: 10, no convergence "
                            "test)", low=1, high=50, step=1)
    prefix_score: str = param("auc_roc", "how a prefix's ReCaLL ratios are compared with the membership scores",
                              choices=PREFIX_SCORES)
    max_texts: int = param(200, "the most texts every prefix is judged on (N texts cost N² conditional passes); "
                           "more are refused unless sample_size is set", low=2, high=5000, step=1)
    sample_size: int = param(0, "0: judge every prefix on all N texts (N² passes); K ≥ 2: on the same K texts drawn "
                             "with sample_seed (N·K passes)", low=0, high=5000, step=1)
    sample_seed: int = param(0, "seed of the judged sample (drawn by text hash: order-independent)", widget=False)
    mode: str = param("ours", '"ours" (the diagonal R[p, p] left out) or "reference" (kept, as the authors\' code)',
                      choices=MODES)

    def __post_init__(self) -> None:
        for name, allowed in (("init", INITS), ("prefix_score", PREFIX_SCORES), ("mode", MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed} (got {getattr(self, name)!r})")
        if not is_int(self.iterations) or self.iterations < 1:
            raise ValueError(f"iterations must be an integer ≥ 1 (got {self.iterations!r})")
        if not is_int(self.max_texts) or self.max_texts < 2:
            raise ValueError(f"max_texts must be an integer ≥ 2 (got {self.max_texts!r})")
        if not is_int(self.sample_size) or self.sample_size == 1 or not 0 <= self.sample_size <= self.max_texts:
            raise ValueError(f"sample_size must be 0 (all texts) or an integer in [2, max_texts={self.max_texts}] "
                             f"(got {self.sample_size!r})")
        if not is_int(self.sample_seed):
            raise ValueError(f"sample_seed must be an integer (got {self.sample_seed!r})")


def judged_texts(texts: list[str], params: EmMiaParams) -> np.ndarray:
    """Indices of the texts every prefix is judged on: all, or the `sample_size` with the smallest seeded hash."""
    n = len(texts)
    if params.sample_size == 0 or params.sample_size >= n:
        if n > params.max_texts:
            raise ValueError(f"EM-MIA on {n} texts needs {n}² = {n * n:,} conditional passes, over the cap "
                             f"max_texts={params.max_texts}: judge each prefix on a seeded sample (sample_size=K, "
                             f"{n}·K passes) or raise max_texts")
        return np.arange(n)
    keys = [hashlib.sha256(f"{params.sample_seed}:{text_sha256(t)}".encode()).hexdigest() for t in texts]
    return np.sort(np.argsort(keys, kind="stable")[:params.sample_size])


def _record(texts: list[str], judged: np.ndarray, params: EmMiaParams, truncated: np.ndarray) -> dict[str, Any]:
    """What every text's details share: the set, the judged texts, the settings."""
    hashes = sorted(text_sha256(t) for t in texts)
    sampled = judged.size < len(texts)
    return {"set_size": len(texts), "set_sha256": hashlib.sha256("".join(hashes).encode()).hexdigest(),
            "judged": [text_sha256(texts[j]) for j in judged] if sampled else "all",
            "judged_count": int(judged.size), "sample_seed": params.sample_seed if sampled else None,
            "conditional_passes": len(texts) * int(judged.size), "init": params.init,
            "prefix_score": params.prefix_score, "diagonal": "kept" if params.mode == "reference" else "left out",
            "prefixes_truncated": int(truncated.sum()), "transductive": TRANSDUCTIVE}


def prepare(stats: list[TokenStats], params: EmMiaParams, *, lm: LanguageModel) -> list[dict[str, Any]]:
    """The whole set's ReCaLL matrix and EM iterations, once: each text's score and details."""
    n = len(stats)
    if n < 2:
        raise ValueError(f"EM-MIA scores a set of texts against each other: it needs at least 2 (got {n})")
    texts = [s.text for s in stats]
    judged = judged_texts(texts, params)
    if n < MIN_SET:
        warnings.warn(f"EM-MIA on {n} texts (< {MIN_SET}): its median split is noisy", stacklevel=2)
    init_spec = get_method(params.init)
    init = np.array([init_spec.fn(s, init_spec.make_params()).value for s in stats], dtype=np.float64)
    ratios, truncated = matrix.recall_matrix(lm, stats, judged)
    trace = iteration.em_iterations(ratios, judged, init, iterations=params.iterations, metric=params.prefix_score,
                                    keep_diagonal=params.mode == "reference")
    shared = _record(texts, judged, params, truncated)
    return [{**shared, "init_score": float(init[i]), "prefix_scores": trace.prefix[:, i].tolist(),
             "membership_scores": trace.membership[:, i].tolist(), "prefix_truncated": bool(truncated[i]),
             **({"warning": f"only {n} texts: the median split is noisy"} if n < MIN_SET else {})}
            for i in range(n)]


@register("em_mia",
          lesson=425, paper=Paper("Kim et al.", 2026, "https://arxiv.org/abs/2410.07582",
                                  "Detecting Training Data of Large Language Models via Expectation Maximization",
                                  "EACL 2026"),
          fails=("It is transductive: every score depends on the whole scored set, and below about 50 texts its "
                 "median split is noisy. It costs N² conditional passes for N texts (METHODS-FIELD.md §15)."),
          access=AccessNeeds(further_passes=True,
                             why="further passes: each scored text's log-probs after every other scored text as a "
                                 "prefix"),
          view=TokenView("log p of each token (EM-MIA scores the set as a whole; shown for orientation only)",
                         "none: the score is set-level"),
          label="EM-MIA (transductive)", params=EmMiaParams, needs=("stats", "lm"), token_level=False,
          prepare=prepare,
          cost="1 + N forward passes per text for a set of N (N² in all; each prefix's cache computed once)",
          extra_passes=lambda p: p.sample_size or p.max_texts,  # the most the cap allows: N is not known here
          reading=lambda v: f"as a one-text ReCaLL prefix for the rest of the set this text scores {-v:.3f} (an AUC "
                            "by default); a poor prefix is likely a member (score = minus that, higher = member).",
          formula=r"R_{px} = \frac{\mathrm{LL}(x \mid p)}{\mathrm{LL}(x)},\ "
                  r"f(p) = \mathrm{AUC}\big(R_{p\cdot},\ [m > \mathrm{median}(m)]\big),\ m \leftarrow -f",
          idea="No labels: each text is tried as a prefix for the others; good prefixes are non-members, and the "
               "membership scores and prefix scores refine each other.",
          summary="Transductive: each text's score is minus how well it works as a ReCaLL prefix for the rest of "
                  "the set, iterated from an initial score.")
def em_mia(stats: TokenStats, params: EmMiaParams, *, lm: LanguageModel, context: dict[str, Any] | None) -> Score:
    """The last iteration's membership score `m^T(x)` (from `prepare`); details: the set, the init, each iteration."""
    require_tokens(stats)
    return Score(context["membership_scores"][-1], stats.logprob.astype(np.float64),
                 np.zeros(stats.n_scored, dtype=bool), context)

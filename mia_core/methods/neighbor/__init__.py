"""Neighbourhood comparison (Mattern et al. 2023, "Membership Inference Attacks against Language Models
via Neighbourhood Comparison", Findings of ACL): the text's likelihood against that of texts a few words away.

Score = mean logprob(text) − aggregate over neighbours of mean logprob(neighbour) (higher = member):
a memorised text is likelier than its close neighbours, an unseen one is not. `aggregate="mean"` is the
paper's; MIMIR's code takes the max (docs/methods.md). Neighbours come from `mia_core.methods.neighbor.engine`: a masked LM
(`mask_model=` hub id or folder; bert-base-uncased in the paper) or, offline, the target itself
(`mask_model="self"`, a different variant, labelled "Neighbor (self-proposed)"). All neighbours of a
text are scored in one batched `lm.token_stats` call, under the text's BOS and long-text policies. The
per-token scores shown are the text's own log-probs (neighbours do not align token by token).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, is_int, param, register, require_tokens
from ...deferred import deferred

if TYPE_CHECKING:  # the engine (torch) loads when a text is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import engine
else:
    engine = deferred(f"{__name__}.engine")

AGGREGATES = ("mean", "max")


@dataclass(frozen=True)
class NeighborParams:
    n_neighbors: int = param(25, "neighbours per text (an integer ≥ 1; the paper and MIMIR: 25)", low=1, high=50,
                             step=1)  # high: the dashboard's bound (docs/security.md)
    swap_fraction: float = param(0.05, "fraction of the proposer's tokens swapped in each neighbour, at least one, in "
                                 "(0, 1] (MIMIR: 5%)", low=0.01, high=1.0, step=0.01)
    aggregate: str = param("mean", 'how the neighbours\' mean log-probs combine: "mean" (the paper) or "max" (MIMIR\'s '
                           "code)", choices=AGGREGATES)
    mask_model: str = param("self", 'a masked LM (hub id or local folder, e.g. bert-base-uncased), or "self": the '
                            "target proposes", widget=False)
    seed: int = param(0, "seed of the neighbour sampling (positions, replacements, embedding dropout)", widget=False)

    def __post_init__(self) -> None:
        check_params(self)


def check_params(params: NeighborParams) -> None:
    """Clear errors for parameters out of range (CLI values arrive as int/float/str)."""
    if not is_int(params.n_neighbors) or params.n_neighbors < 1:
        raise ValueError(f"n_neighbors must be an integer ≥ 1 (got {params.n_neighbors!r})")
    if isinstance(params.swap_fraction, bool) or not isinstance(params.swap_fraction, (int, float)) \
            or not 0 < params.swap_fraction <= 1:
        raise ValueError(f"swap_fraction must be in (0, 1] (got {params.swap_fraction!r})")
    if params.aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES} (got {params.aggregate!r})")
    if not isinstance(params.mask_model, str) or not params.mask_model.strip():
        raise ValueError(f"mask_model must be 'self' or a masked LM's hub id or folder (got {params.mask_model!r})")
    if not is_int(params.seed) or params.seed < 0:
        raise ValueError(f"seed must be an integer ≥ 0 (got {params.seed!r})")


@register("neighbor", access=AccessNeeds(further_passes=True, why="further passes on neighbour texts"),
          lesson=340, paper=Paper("Mattern, Mireshghallah, Jin, Schölkopf, Sachan & Berg-Kirkpatrick", 2023,
                                  "https://aclanthology.org/2023.findings-acl.719",
                                  "Membership Inference Attacks against Language Models via Neighbourhood "
                                  "Comparison", "Findings of ACL 2023"),
          fails=("It costs many passes (MIMIR: 25 neighbours) and a masked language model to propose them, and on "
                 "MIMIR it is no better than the loss (mean AUROC 52.0–53.8 on Pythia 160M–6.9B, Min-K%++ paper, Table "
                 "2)."),
          view=TokenView("the per-token output shown with Neighbourhood, which scores the text as a whole (for "
                         "orientation only)",
                         "the tokens it looked at"),
          label="Neighbourhood", params=NeighborParams, needs=("stats", "lm"), token_level=False,
          reading=lambda v: f"the text is {abs(v):.2f} nats per token {'more' if v >= 0 else 'less'} likely than texts "
                            "a few words away; a memorised text stands out from its neighbours.",
          formula=r"\mathrm{score}(x) = \overline{\log p}(x) - \frac{1}{N}\sum_{\tilde x \in \mathcal{N}(x)} "
                  r"\overline{\log p}(\tilde x)",
          idea="A memorised text is likelier than texts a few words away from it; an unseen one is not.",
          cost="1 + n_neighbors forward passes + proposals (self: 1 pass; masked LM: 1 per swapped position)",
          extra_passes=lambda p: p.n_neighbors + 1,  # the neighbours, and the pass that proposes them
          summary="Mean log-prob of the text minus that of neighbours with a few words swapped (masked LM or the target).")
def neighbor(stats: TokenStats, params: NeighborParams, *, lm: LanguageModel) -> Score:
    """`mean logprob(text) − mean|max over neighbours of mean logprob(neighbour)`."""
    require_tokens(stats)
    found = engine.make_neighbors(stats, engine.proposer_for(params.mask_model, lm), n=int(params.n_neighbors),
                           swap_fraction=float(params.swap_fraction), seed=int(params.seed))
    texts = list(dict.fromkeys(nb.text for nb in found.neighbors))  # repeats are scored once
    by_text = dict(zip(texts, lm.token_stats(texts, **stats.policies)))
    for s in by_text.values():
        require_tokens(s)
    means = np.array([np.mean(by_text[nb.text].logprob, dtype=np.float64) for nb in found.neighbors])
    own = stats.logprob.astype(np.float64)
    reference = float(means.mean() if params.aggregate == "mean" else means.max())
    details = {
        "variant": found.variant,
        "aggregate": params.aggregate,
        "swap_unit": found.unit,
        "neighbors": [{"neighbor": nb.text, "mean_logprob": float(m), "swapped": len(nb.swaps)}
                      for nb, m in zip(found.neighbors, means)],
    }
    return Score(float(np.mean(own)) - reference, own, np.ones(stats.n_scored, bool), details)

"""Gradient norm (MIMIR `mimir/attacks/gradnorm.py`; Wang et al., arXiv 2402.17012, pandora-llm `GradNorm`).

Training data sits nearer a minimum of the loss, so its gradient is smaller. Per text:
L = −(1/n) Σ_t ℓ_t over exactly the tokens the shared statistics pass scores (boundary token first
under bos="auto"; a text longer than the context is truncated or windowed as its statistics were;
float32 log-softmax), one backward in eval mode, and

    G = mean over parameter tensors θ of ‖∂L/∂θ‖_p      (aggregate="mean", MIMIR)
    G = ‖∂L/∂θ‖_p over all parameters as one vector      (aggregate="global", pandora-llm)
    G = ‖∂L/∂E(x)‖_p over the T×d input embeddings       (wrt="inputs", pandora-llm)

with p = ∞ (default; MIMIR reads `kwargs.get("p", np.inf)` and never passes it), 1 or 2. Only tensors
that receive a gradient count (every parameter takes part whatever its `requires_grad`, which is set on
for the pass and restored); a tied input/output embedding is one tensor, counted once.
**score = −G** (higher = member). Token scores: with wrt="inputs" −‖∂L/∂E(x_t)‖_p, the gradient on
each scored token's own input embedding (the registry's `token_level` is False: the default wrt="params"
has none, and shows ℓ_t).

`prepare` computes every text's norms together (`engine.py`: batched where exact and faster) and hands
each text its norms (all three p, per tensor) as its context; the scorer reduces them for `p` and
`aggregate`.

Deviations from the reference code:
- MIMIR's sign bug is not copied: MIMIR returns −G and its `get_roc_metrics` multiplies every score
  by −1 (it assumes lower = member), so MIMIR ranks a *larger* gradient as member, against
  pandora-llm ("lower means more likely to be train") and against the rationale. Whether MIMIR's
  published GradNorm numbers carry this sign is **unconfirmed**.
- MIMIR backpropagates the mean over its strided windows for long texts; we use the shared pass's
  token set (its sliding windows add their gradients, or its truncation).
- pandora-llm masks token id 0 (`attention_mask = input_ids > 0`) and defaults to `model.half()`;
  we count tokens from the ids fed and keep the model's dtype (a non-finite gradient is an error).
- Gradients come from `torch.autograd.grad`: no `.grad` is written, and every parameter's
  `requires_grad` and the train/eval mode are restored afterwards.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, param, register, require_tokens
from ...deferred import deferred

if TYPE_CHECKING:  # the engine (torch) loads when a text is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import engine
    from .engine import TextGradient
else:
    engine = deferred(f"{__name__}.engine")

AGGREGATES = ("mean", "global")
WRT = ("params", "inputs")


def normalise_p(p) -> str | int:
    """"inf" for ∞ (float inf, np.inf, "inf", "∞"), else 1 or 2; ValueError otherwise."""
    if isinstance(p, str) and p.strip().lower() in ("inf", "infinity", "∞", "1", "2"):
        p = p.strip().lower()
        return int(p) if p in ("1", "2") else "inf"
    if not isinstance(p, bool) and isinstance(p, (int, float, np.integer, np.floating)):
        if math.isinf(p) and p > 0:
            return "inf"
        if p in (1, 2):
            return int(p)
    raise ValueError(f"p must be inf, 1 or 2 (got {p!r})")


@dataclass(frozen=True)
class GradNormParams:
    p: str | int = param("inf", 'norm order: "inf" (∞, the default as MIMIR\'s; float inf is accepted), 1 or 2',
                         choices=("inf", 1, 2))
    aggregate: str = param("mean", '"mean": the mean of the per-tensor norms (MIMIR); "global": one norm over all '
                           "parameters (pandora-llm)", choices=AGGREGATES)
    wrt: str = param("params", 'differentiate with respect to the model\'s "params", or its "inputs" (the T×d input '
                     "embeddings, pandora-llm)", choices=WRT)

    def __post_init__(self) -> None:
        object.__setattr__(self, "p", normalise_p(self.p))
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES} (got {self.aggregate!r})")
        if self.wrt not in WRT:
            raise ValueError(f"wrt must be one of {WRT} (got {self.wrt!r})")


def combine(norms: np.ndarray, p: str | int, aggregate: str) -> float:
    """G from per-piece norms of order p (pieces = tensors or positions): their mean, or the norm of all of them."""
    if aggregate == "mean":
        return float(np.mean(norms))
    if p == "inf":
        return float(np.max(norms))
    return float(np.sum(norms)) if p == 1 else float(np.sqrt(np.sum(np.square(norms))))


def text_gradients(lm: LanguageModel, stats: Sequence[TokenStats], wrt: str, *, batched: bool | None = None,
                   batch_tokens: int | None = None) -> list[TextGradient]:
    """Each text's gradient norms under its statistics' policies, the texts of one policy computed together.

    batched : wrt="params" only: True = per-sample `torch.func` batches, False = the loop, None = `vmap_suits`.
    """
    found: list[TextGradient | None] = [None] * len(stats)
    groups: dict[tuple[str, str], list[int]] = {}
    for i, s in enumerate(stats):
        groups.setdefault((s.policies["bos"], s.policies["long_text"]), []).append(i)
    for (bos, long_text), members in groups.items():
        plans = engine.plans_for(lm, [stats[i].text for i in members], bos, long_text)
        if wrt == "inputs":
            results = engine.input_norms(lm, plans, batch_tokens=batch_tokens)
        elif batched or batched is None and engine.vmap_suits(lm):
            results = engine.batched_param_norms(lm, plans, batch_tokens=batch_tokens)
        else:
            results = engine.loop_param_norms(lm, plans)
        for i, result in zip(members, results):
            found[i] = result
    return found


def prepare(stats: list[TokenStats], params: GradNormParams, *, lm: LanguageModel) -> list[TextGradient]:
    """Every text's gradient norms computed together (batched where exact and faster): each text's context."""
    return text_gradients(lm, stats, params.wrt)


@register("grad_norm", access=AccessNeeds(gradients=True, why="the gradient of the text's loss"),
          lesson=610, paper=Paper("Wang et al.", 2024, "https://arxiv.org/abs/2402.17012",
                                  "Pandora's White-Box: Increased Training Data Leakage in Open LLMs",
                                  "arXiv:2402.17012"),
          fails=("MIMIR's port ranks a larger gradient as member, against the rationale, and whether its published "
                 "numbers carry that sign is unconfirmed; bf16 or fp16 gradients can underflow (METHODS-FIELD.md §7)."),
          view=TokenView("the per-token output shown with Gradient norm, which scores the text as a whole (for "
                         "orientation only)",
                         "the tokens it looked at"),
          label="Gradient norm", params=GradNormParams, needs=("stats", "lm"), token_level=False, prepare=prepare,
          cost="1 forward + 1 backward pass per text", extra_passes=lambda p: 3,
          reading=lambda v: f"the loss gradient of this text has norm {-v:.3g}: training leaves members nearer a "
                            "minimum, with smaller gradients.",
          formula=r"\mathrm{score}(x) = -\frac{1}{|\Theta|}\sum_{\theta \in \Theta} "
                  r"\Big\lVert \tfrac{\partial \mathcal{L}(x)}{\partial \theta} \Big\rVert_p,\ "
                  r"\mathcal{L}(x) = -\frac{1}{n}\sum_t \log p(x_t \mid x_{<t})",
          idea="Training data sits nearer a minimum of the loss, so its gradient is smaller.",
          summary="Minus the norm of the loss gradient (per parameter tensor, averaged; p = ∞ by default): members "
                  "sit nearer a minimum.")
def grad_norm(stats: TokenStats, params: GradNormParams, *, lm: LanguageModel, context: TextGradient) -> Score:
    """−G from the text's gradient norms (`context`, from `prepare`). Token scores: −‖∂L/∂E(x_t)‖_p with
    wrt="inputs", else the log-probs ℓ_t."""
    require_tokens(stats)
    found = context
    if found.n_scored != stats.n_scored:
        raise ValueError(f"the statistics score {stats.n_scored} tokens but this model feeds {found.n_scored} for "
                         f"text {stats.text[:40]!r}: were they computed with another model or tokenizer?")
    column = engine.ORDERS.index(math.inf if params.p == "inf" else float(params.p))
    norms = found.norms[:, column]
    g = combine(norms, params.p, "global" if params.wrt == "inputs" else params.aggregate)
    if params.wrt == "inputs":  # fed position i + 1 holds scored token i
        token_scores = -norms[1 : 1 + stats.n_scored]
    else:
        token_scores = stats.logprob.astype(np.float64)
    details = {"gradient_norm": g, "p": params.p, "aggregate": params.aggregate if params.wrt == "params" else "global",
               "wrt": params.wrt, "pieces": int(norms.shape[0]), "loss": found.loss, "long_text": found.long_text}
    return Score(-g, token_scores, np.ones(stats.n_scored, bool), details)


__all__ = ["GradNormParams", "combine", "grad_norm", "normalise_p", "prepare", "text_gradients"]

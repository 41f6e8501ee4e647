"""ReCaLL (Xie et al. 2024, arXiv 2406.15968) and Con-ReCall (Wang et al. 2024, arXiv 2409.03363).

ReCaLL: a prefix of known non-members lowers the log-likelihood of members more than that of
non-members, so `score = LL(x|P) / LL(x)` (both negative; higher = member, not negated — the
authors' project page and code). Con-ReCall contrasts a non-member prefix with a member prefix:
`score = (LL(x|P_nm) − γ·LL(x|P_m)) / LL(x)` (γ = 0.5 as fast-mia; the paper's default γ is
unconfirmed). Conditioning follows docs/methods.md "recall": the shared pass's own tokens are scored
after the prefix, so conditional and unconditional log-probs pair up token by token; the prefix's
key-value cache is computed once per fitted prefix and reused for every text (`prefix.py`).

Shots come from helper texts the user names, never from the scored texts (the ports draw them from
the benchmark itself, which leaks labels). Shots are joined with "" (every port but SoK's " ").
`mode="reference"` reproduces the authors' tokenisation instead (prefix and text encoded separately,
all of enc(x) scored in the numerator, enc(x)[1:] in the denominator).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ...api import AccessNeeds, Paper, Score, TokenStats, TokenView, param, register, require_tokens
from ...deferred import deferred
from ..helper_texts import HelperTexts, as_helper_texts

if TYPE_CHECKING:  # the prefix engine (torch) loads when a text is scored, not when the method is registered
    from ...model.language_model import LanguageModel
    from . import prefix
    from .prefix import Conditioning
else:
    prefix = deferred(f"{__name__}.prefix")

MODES = ("ours", "reference")
#: The denominator's ceiling: LL(x) is negative; a text the model predicts perfectly would divide by 0.
LL_CEILING = -1e-12


def _check_shots(n_shots) -> None:
    """n_shots is a positive integer (CLI values arrive as int)."""
    if isinstance(n_shots, bool) or not isinstance(n_shots, (int, np.integer)) or n_shots < 1:
        raise ValueError(f"n_shots must be an integer ≥ 1 (got {n_shots!r})")


@dataclass(frozen=True)
class RecallParams:
    n_shots: int = param(10, "known non-members in the prefix (the first n_shots helper texts; fast-mia and SoK: 10)",
                         low=1, high=100, step=1)
    mode: str = param("ours", '"ours" (the shared pass\'s tokens, paired) or "reference" (the authors\' tokenisation)',
                      choices=MODES)

    def __post_init__(self) -> None:
        _check_shots(self.n_shots)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} (got {self.mode!r})")


@dataclass(frozen=True)
class ConRecallParams:
    n_shots: int = param(10, "known non-members in one prefix and known members in the other", low=1, high=100,
                         step=1)
    gamma: float = param(0.5, "weight of the member prefix (≥ 0; fast-mia: 0.5; tune it only on a held-out labelled "
                         "split)", low=0.0, high=2.0, step=0.05)

    def __post_init__(self) -> None:
        _check_shots(self.n_shots)
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, (int, float)) or not np.isfinite(self.gamma) \
                or self.gamma < 0:
            raise ValueError(f"gamma must be a finite number ≥ 0 (got {self.gamma!r})")


def conditioned(lm: LanguageModel, helpers: HelperTexts, n_shots: int, stats: list[TokenStats],
                derived: dict | None = None) -> list[Conditioning]:
    """Each text's conditioning on the first `n_shots` helper texts, batched against one prefix cache; done once per
    scoring call when ReCaLL and Con-ReCall both need it (`derived`: the call's shared work)."""
    shots = helpers.texts[:n_shots]
    key = ("conditioned", lm.fingerprint, shots, tuple(st.text for st in stats), stats[0].bos_policy if stats else "")
    if derived is None:
        return prefix.condition(lm, shots, stats)
    if key not in derived:
        derived[key] = prefix.condition(lm, shots, stats)
    return derived[key]


def _prepare_recall(stats: list[TokenStats], params: RecallParams, *, lm: LanguageModel, shots_nonmembers,
                    derived: dict) -> list[Conditioning | None]:
    """Every text's conditional pass in batches against one prefix cache (mode "ours"): each text's context."""
    if params.mode != "ours":
        return [None] * len(stats)
    return conditioned(lm, as_helper_texts(shots_nonmembers, "shots_nonmembers"), params.n_shots, stats, derived)


def _ratio(numerator: float, stats: TokenStats, m: int) -> tuple[float, float]:
    """(score, LL(x) over the first m tokens): the numerator over the text's own log-likelihood."""
    ll = float(np.mean(stats.logprob[:m], dtype=np.float64))
    return numerator / min(ll, LL_CEILING), ll


def _scored(stats: TokenStats, m: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(token scores, selection) over all scored tokens: `values` on the first m, unselected zeros after."""
    token_scores = np.zeros(stats.n_scored)
    token_scores[:m] = values[:m]
    selected = np.zeros(stats.n_scored, dtype=bool)
    selected[:m] = True
    return token_scores, selected


@register("recall",
          lesson=410, paper=Paper("Xie et al.", 2024, "https://arxiv.org/abs/2406.15968",
                                  "ReCaLL: Membership Inference via Relative Conditional Log-Likelihoods",
                                  "EMNLP 2024"),
          fails=("It needs known non-members of the same kind for its prefix; the authors' code and the ports draw "
                 "them from the evaluated benchmark itself, which leaks labels, and a long prefix leaves less context "
                 "for the text (METHODS-FIELD.md §1)."),
          access=AccessNeeds(further_passes=True,
                             why="further passes: the text's log-probs after a prefix of known non-members"),
          view=TokenView("log p after the non-member prefix minus log p without it (0 = the prefix changed nothing)",
                         "the tokens compared (all, unless the text was cut to fit after the prefix)",
                         low="the prefix cost this token likelihood, which members show more: member-like",
                         high="the prefix made this token likelier: less member-like",
                         member_high=False,
                         centre=0.0,
                         token_range=(-2.0, 2.0)),
          label="ReCaLL", params=RecallParams, needs=("stats", "lm", "shots_nonmembers"),
          prepare=_prepare_recall,
          cost="2 forward passes (the shots' key-value cache computed once and shared)", extra_passes=lambda p: 1,
          reading=lambda v: f"after a prefix of known non-members the text keeps {v:.3f}× its log-likelihood; "
                            "members lose more likelihood to a non-member prefix (higher = member).",
          formula=r"\mathrm{score}(x) = \frac{\mathrm{LL}(x \mid P_{\mathrm{non}})}{\mathrm{LL}(x)},\ "
                  r"\mathrm{LL} = \frac{1}{n}\sum_t \log p(x_t \mid \cdot)",
          idea="A prefix of texts the model never saw lowers the likelihood of texts it did see more.",
          summary="Log-likelihood after a prefix of known non-members divided by the plain log-likelihood.")
def recall(stats: TokenStats, params: RecallParams, *, lm: LanguageModel, shots_nonmembers,
           context: Conditioning | None) -> Score:
    """`LL(x|P) / min(LL(x), −1e-12)` over the same tokens; per token `ℓ_t|P − ℓ_t`."""
    require_tokens(stats)
    helpers = as_helper_texts(shots_nonmembers, "shots_nonmembers")
    shots = helpers.texts[:params.n_shots]
    if params.mode == "reference":
        ll_cond, ll, kept = prefix.reference_conditioning(lm, shots, stats.text)
        details = {"mode": "reference", "ll_conditional": ll_cond, "ll_unconditional": ll, "shots_kept": kept,
                   "shots_given": len(shots),
                   "shots_source": helpers.source}
        return Score(ll_cond / min(ll, LL_CEILING), stats.logprob.astype(np.float64), np.ones(stats.n_scored, bool),
                     details)
    found = context
    m = found.fitted.n_scored
    ll_cond = float(np.mean(found.logprob, dtype=np.float64))
    value, ll = _ratio(ll_cond, stats, m)
    token_scores, selected = _scored(stats, m, found.logprob.astype(np.float64) - stats.logprob[:m])
    details = {"ll_conditional": ll_cond, "ll_unconditional": ll, "shots_kept": found.fitted.n_kept,
               "shots_given": len(shots), "scored_tokens": m, "truncated": found.fitted.truncated,
               "shots_source": helpers.source}
    return Score(value, token_scores, selected, details)


def _prepare_con_recall(stats: list[TokenStats], params: ConRecallParams, *, lm: LanguageModel, shots_nonmembers,
                        shots_members, derived: dict) -> list[tuple[Conditioning, Conditioning]]:
    """Both prefixes' conditional passes, batched against their caches: each text's (non-member, member) pair (the
    non-member one shared with ReCaLL in the same call)."""
    non = conditioned(lm, as_helper_texts(shots_nonmembers, "shots_nonmembers"), params.n_shots, stats, derived)
    mem = conditioned(lm, as_helper_texts(shots_members, "shots_members"), params.n_shots, stats, derived)
    return list(zip(non, mem))


@register("con_recall",
          lesson=420, paper=Paper("Wang et al.", 2024, "https://arxiv.org/abs/2409.03363",
                                  "Con-ReCall: Detecting Pre-training Data in LLMs via Contrastive Decoding",
                                  "arXiv:2409.03363"),
          fails=("It needs known members as well as known non-members; the paper's default γ is unconfirmed, and "
                 "tuning γ on the evaluation labels leaks them (METHODS-FIELD.md §2)."),
          access=AccessNeeds(further_passes=True,
                             why="further passes: the text's log-probs after prefixes of known non-members and "
                                 "members"),
          view=TokenView("log p after the non-member prefix minus γ · log p after the member prefix",
                         "the tokens compared (all, unless the text was cut to fit after a prefix)",
                         low="member-like (the score divides this by the negative log-likelihood)",
                         high="less member-like",
                         member_high=False),
          label="Con-ReCall", params=ConRecallParams, prepare=_prepare_con_recall,
          needs=("stats", "lm", "shots_nonmembers", "shots_members"),
          cost="3 forward passes (each prefix's key-value cache computed once and shared)", extra_passes=lambda p: 2,
          reading=lambda v: f"the contrast of a non-member and a member prefix is {v:.3f} of the text's "
                            "log-likelihood; members react to the two prefixes asymmetrically (higher = member).",
          formula=r"\mathrm{score}(x) = \frac{\mathrm{LL}(x \mid P_{\mathrm{non}}) - \gamma\,"
                  r"\mathrm{LL}(x \mid P_{\mathrm{mem}})}{\mathrm{LL}(x)}",
          idea="Members react differently to a prefix of non-members than to a prefix of members; the contrast "
               "of the two separates them.",
          summary="Log-likelihood after a non-member prefix minus γ times that after a member prefix, over the "
                  "plain log-likelihood.")
def con_recall(stats: TokenStats, params: ConRecallParams, *, lm: LanguageModel, shots_nonmembers,
               shots_members, context: tuple[Conditioning, Conditioning]) -> Score:
    """`(LL(x|P_nm) − γ·LL(x|P_m)) / min(LL(x), −1e-12)` over the tokens both prefixes leave room for."""
    require_tokens(stats)
    non = as_helper_texts(shots_nonmembers, "shots_nonmembers")
    mem = as_helper_texts(shots_members, "shots_members")
    c_non, c_mem = context
    m = min(c_non.fitted.n_scored, c_mem.fitted.n_scored)
    ll_non = float(np.mean(c_non.logprob[:m], dtype=np.float64))
    ll_mem = float(np.mean(c_mem.logprob[:m], dtype=np.float64))
    value, ll = _ratio(ll_non - params.gamma * ll_mem, stats, m)
    per_token = c_non.logprob[:m].astype(np.float64) - params.gamma * c_mem.logprob[:m].astype(np.float64)
    token_scores, selected = _scored(stats, m, per_token)
    details = {"ll_nonmember_prefix": ll_non, "ll_member_prefix": ll_mem, "ll_unconditional": ll, "gamma": params.gamma,
               "scored_tokens": m, "truncated": c_non.fitted.truncated or c_mem.fitted.truncated,
               "shots_kept": {"non-members": c_non.fitted.n_kept, "members": c_mem.fitted.n_kept},
               "shots_source": {"non-members": non.source, "members": mem.source}}
    return Score(value, token_scores, selected, details)

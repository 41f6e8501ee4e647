"""GDS, Gradient Deviation Scores (Zhang et al. 2026, arXiv:2603.04828, §4; docs/methods.md "gds").

A **supervised** method: eight statistics of every LoRA-B gradient of the text's causal-LM loss
(magnitude, position, concentration; `features.py`) feed an MLP fitted on labelled members and
non-members of the same distribution. The score is the MLP's member log-odds (higher = member;
the probability is in `details`): log-odds keep the ranking that saturated probabilities lose.
The classifier fixes the feature settings (LoRA rank, seed, BOS policy, max tokens), so they are
not parameters here. Deviation from the paper: none in the features; the split is recorded.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from ...model.language_model import LanguageModel
from ...api import AccessNeeds, NoParams, Score, TokenStats, TokenView, register, require_tokens
from .classifier import GdsClassifier, as_classifier, fit_texts
from .features import GdsSettings, gradient_features


def prepare(stats: list[TokenStats], params: NoParams, *, lm: LanguageModel, classifier) -> None:
    """All texts' gradient features in batched backwards, remembered by the classifier for `gds` to read back."""
    as_classifier(classifier).score_texts(lm, [s.text for s in stats])


@register("gds", access=AccessNeeds(gradients=True, why="gradients of the text's loss through adapter weights"),
          view=TokenView("the per-token output shown with GDS (supervised), which scores the text as a whole (for orientation only)", "the tokens it looked at"),
          label="GDS (supervised)", needs=("stats", "lm", "classifier"), token_level=False, prepare=prepare,
          reading=lambda v: f"a classifier trained on labelled examples reads this text's LoRA gradients as member "
                            f"with probability {expit(v):.0%} (log-odds {v:.2f}); it is only as good as the labelled "
                            "split it learned from.",
          formula=r"\mathrm{score}(x) = \operatorname{logit}\, \mathrm{MLP}\big(\phi(\nabla_{B} \mathcal{L}(x))\big),\ "
                  r"\phi = \text{eight statistics of each LoRA-}B\text{ gradient}",
          idea="Training leaves members with small, diffuse gradients; a classifier fitted on labelled texts learns "
               "the pattern (supervised: it needs known members and non-members of the same kind).",
          cost="1 forward + 1 backward pass per text (LoRA gradients), plus an MLP fitted on labelled texts",
          summary="Supervised: an MLP trained on labelled members and non-members reads LoRA-gradient statistics "
                  "(magnitude, position, concentration of the update); score = its member log-odds.")
def gds(stats: TokenStats, params: NoParams, *, lm: LanguageModel, classifier) -> Score:
    """Member log-odds of the text under a fitted `GdsClassifier` (or the folder it was saved in).

    Token scores shown are the target's log-probs (GDS has no per-token score).
    """
    require_tokens(stats)
    clf = as_classifier(classifier)
    value = float(clf.score_texts(lm, [stats.text])[0])
    details = {"member_probability": float(expit(value)), "supervised": clf.describe(),
               "in_training_split": clf.trained_on(stats.text)}
    return Score(value, stats.logprob.astype(np.float64), np.ones(stats.n_scored, bool), details)


__all__ = ["GdsClassifier", "GdsSettings", "as_classifier", "fit_texts", "gds", "gradient_features"]

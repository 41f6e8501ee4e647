"""GDS, Gradient Deviation Scores (Zhang et al. 2026, arXiv:2603.04828, §4; docs/methods.md "gds").

A **supervised** method: eight statistics of every LoRA-B gradient of the text's causal-LM loss
(magnitude, position, concentration; `features.py`) feed an MLP fitted on labelled members and
non-members of the same distribution. The score is the MLP's member log-odds (higher = member;
the probability is in `details`): log-odds keep the ranking that saturated probabilities lose.
Its parameters are the fit's (LoRA rank and scale, the A matrices' seed, max tokens); a fitted
classifier carries them and scores with them (one given when scoring is checked against them). Deviation from the paper: none in the features; the
split is recorded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...api import AccessNeeds, Paper, Score, Supervised, TokenStats, TokenView, is_int, param, register, require_tokens
from ...deferred import deferred
from ..labelled import check_labels
from .settings import GdsSettings

if TYPE_CHECKING:  # the classifier and features (torch) load when GDS fits or scores, not when it is registered
    from ...model.language_model import LanguageModel
    from . import classifier as classifiers, features
    from .classifier import GdsClassifier
    from .features import Progress
    from scipy import special
else:
    classifiers, features = deferred(f"{__name__}.classifier"), deferred(f"{__name__}.features")
    special = deferred("scipy.special")


#: The paper's feature settings, used by a fit that is not told otherwise.
FIT_DEFAULTS = GdsSettings()


@dataclass(frozen=True)
class GdsParams:
    """The feature settings of a fit; None = the paper's default when fitting, the classifier's own when scoring (a
    value given when scoring must be the classifier's: it is checked, never silently ignored)."""

    lora_r: int | None = param(None, f"LoRA rank: rows of each gradient matrix (fit default {FIT_DEFAULTS.r})",
                               low=2, high=64, step=1, widget=False)
    lora_alpha: int | None = param(None, "LoRA scaling numerator (scale = alpha / r); it multiplies every gradient "
                                         f"(fit default {FIT_DEFAULTS.alpha})", low=1, high=256, step=1, widget=False)
    lora_seed: int | None = param(None, f"seed of the random LoRA A matrices (fit default {FIT_DEFAULTS.seed})",
                                  widget=False)
    max_tokens: int | None = param(None, "tokens per text for the gradients, boundary token included (fit default "
                                         f"{FIT_DEFAULTS.max_tokens}, the paper's; 256 for WikiMIA)", low=2, high=4096,
                                   step=1, widget=False)

    def __post_init__(self) -> None:
        given = [v for v in (self.lora_r, self.lora_alpha, self.lora_seed, self.max_tokens) if v is not None]
        if not all(is_int(v) for v in given):
            raise ValueError(f"GDS parameters are integers (got {self})")
        self.settings("auto")  # checks the ranges

    @property
    def given(self) -> bool:
        """Whether any setting was given (else a fitted classifier's own are used)."""
        return any(v is not None for v in (self.lora_r, self.lora_alpha, self.lora_seed, self.max_tokens))

    def settings(self, bos: str, base: GdsSettings = FIT_DEFAULTS) -> GdsSettings:
        """The feature settings under a BOS policy, each unset one taken from `base`."""
        return GdsSettings(base.r if self.lora_r is None else self.lora_r,
                           base.alpha if self.lora_alpha is None else self.lora_alpha,
                           base.seed if self.lora_seed is None else self.lora_seed,
                           base.max_tokens if self.max_tokens is None else self.max_tokens, bos)


def fit(lm: LanguageModel, texts: Sequence[str], labels, params: GdsParams, *, train: np.ndarray, split: dict,
        seed: int, bos: str = "auto", batch_tokens: int | None = None, progress: Progress | None = None,
        score_all: bool = False) -> tuple[GdsClassifier, np.ndarray | None]:
    """The MLP fitted on the rows `train` (its split record kept in its spec); with `score_all`, every text's features
    are computed in the same batches and every text's log-odds returned too (else only the training rows' features)."""
    y = check_labels(labels)
    texts = [str(t) for t in texts]
    rows = np.arange(len(texts)) if score_all else np.asarray(train)
    found = features.gradient_features(lm, [texts[i] for i in rows], params.settings(bos), batch_tokens=batch_tokens,
                                       progress=progress)
    train_features = found[train] if score_all else found  # rows are every text, or the training rows
    clf = classifiers.fit_classifier(train_features, y[train], lm, settings=params.settings(bos), seed=seed, split=split)
    return clf, (clf.log_odds(found) if score_all else None)


def load_classifier(path: Any) -> GdsClassifier:
    """A `GdsClassifier` saved by `mia fit --method gds` (what `--param classifier=FOLDER` names)."""
    return classifiers.GdsClassifier.load(path)


def prepare(stats: list[TokenStats], params: GdsParams, *, lm: LanguageModel, classifier: Any) -> list[float]:
    """All texts' gradient features in batched backwards: each text's context is its member log-odds. Settings
    given as parameters must be the classifier's own."""
    clf = classifiers.as_classifier(classifier)
    if params.given:
        clf.check(lm, params.settings(clf.settings.bos, base=clf.settings))
    return [float(v) for v in clf.score_texts(lm, [s.text for s in stats])]


@register("gds", access=AccessNeeds(gradients=True, why="gradients of the text's loss through adapter weights"),
          lesson=620, paper=Paper("Zhang, Wang, Zhang, Zheng & Lan", 2026, "https://arxiv.org/abs/2603.04828",
                                  "From Unfamiliar to Familiar: Detecting Pre-training Data via Gradient Deviations"
                                  " in Large Language Models", "arXiv:2603.04828"),
          fails=("It is supervised: it needs labelled members and non-members of the same distribution to fit its "
                 "classifier (the paper trains on 30% of each benchmark), which an auditor of an undisclosed corpus "
                 "rarely has."),
          view=TokenView("the per-token output shown with GDS (supervised), which scores the text as a whole (for "
                         "orientation only)", "the tokens it looked at"),
          label="GDS (supervised)", params=GdsParams, needs=("stats", "lm", "classifier"), token_level=False,
          prepare=prepare, supervised=Supervised("classifier", fit, load_classifier),
          reading=lambda v: f"a classifier trained on labelled examples reads this text's LoRA gradients as member "
                            f"with probability {special.expit(v):.0%} (log-odds {v:.2f}); it is only as good as the labelled "
                            "split it learned from.",
          formula=r"\mathrm{score}(x) = \operatorname{logit}\, \mathrm{MLP}\big(\phi(\nabla_{B} \mathcal{L}(x))\big),\ "
                  r"\phi = \text{eight statistics of each LoRA-}B\text{ gradient}",
          idea="Training leaves members with small, diffuse gradients; a classifier fitted on labelled texts learns "
               "the pattern (supervised: it needs known members and non-members of the same kind).",
          cost="1 forward + 1 backward pass per text (LoRA gradients), plus an MLP fitted on labelled texts",
          extra_passes=lambda p: 3,
          summary="Supervised: an MLP trained on labelled members and non-members reads LoRA-gradient statistics "
                  "(magnitude, position, concentration of the update); score = its member log-odds.")
def gds(stats: TokenStats, params: GdsParams, *, lm: LanguageModel, classifier: Any, context: float) -> Score:
    """Member log-odds of the text (`context`, from `prepare`) under a fitted `GdsClassifier`.

    Token scores shown are the target's log-probs (GDS has no per-token score).
    """
    require_tokens(stats)
    clf = classifiers.as_classifier(classifier)
    details = {"member_probability": float(special.expit(context)), "supervised": clf.describe(),
               "in_training_split": clf.trained_on(stats.text)}
    return Score(float(context), stats.logprob.astype(np.float64), np.ones(stats.n_scored, bool), details)


__all__ = ["GdsParams", "GdsSettings", "fit", "gds", "load_classifier", "prepare"]

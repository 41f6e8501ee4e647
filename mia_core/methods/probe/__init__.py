"""Probe, probing activations (Liu et al., ACL 2024, arXiv:2406.01333; METHODS-FIELD.md §16; docs/methods.md "probe").

A **supervised** method in the registry's sense, though it needs no target labels: known non-members D_aux are split
into A and B, a copy of the target is fine-tuned on A (the proxy, `proxy.py`), a no-bias logistic probe per layer
learns A vs B from the proxy's last-token activations (`linear.py`), and the dev-best layer's probe scores a text
from the **target's** activations: score = wᵀh̃, the logit (σ saturates; higher = member, never negated — the
authors negate twice). Built from the authors' code (zhliu0106/probing-lm-data 1469000), not SoK's port, whose bugs
(last layer's probe on the dev-best layer's activations, unstandardized target features, position −1 under right
padding) are not copied. Deviations, recorded in every fit: LoRA proxy (default; `lora_r=0` = the authors' full
fine-tuning), the model's dtype (the authors: bf16), no LR sweep (one `lr`), dev = held-out proxy features (no target
labels), probe weights start at 0. Unconfirmed: that the authors' last token follows the trailing space of
"Answer: " (we read the last token the tokenizer gives); the authors' D_aux being post-cutoff texts.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ...api import AccessNeeds, Paper, Score, Supervised, TokenStats, TokenView, param, register, require_tokens
from ...deferred import deferred
from ..labelled import check_labels
from .settings import ProbeSettings

if TYPE_CHECKING:  # torch, peft and scikit-learn load when Probe fits or scores, not when it is registered
    from ...model.language_model import LanguageModel
    from . import fitted, train as training
    from .activations import Progress
    from .fitted import ProbeFit
else:
    fitted, training = deferred(f"{__name__}.fitted"), deferred(f"{__name__}.train")

FIT_DEFAULTS = ProbeSettings()


@dataclass(frozen=True)
class ProbeParams:
    """The fit's settings (None = the default when fitting; when scoring, a value given must be the fit's own) and how
    target features are standardized."""

    lr: float | None = param(None, f"proxy fine-tune LR (fit default {FIT_DEFAULTS.lr})", widget=False)
    epochs: int | None = param(None, f"proxy fine-tune epochs (fit default {FIT_DEFAULTS.epochs})", widget=False)
    lora_r: int | None = param(None, f"LoRA rank of the proxy; 0 = full fine-tuning (fit default {FIT_DEFAULTS.lora_r})",
                               widget=False)
    batch_size: int | None = param(None, f"texts per proxy step (fit default {FIT_DEFAULTS.batch_size})", widget=False)
    max_tokens: int | None = param(None, f"tokens per wrapped text (fit default {FIT_DEFAULTS.max_tokens})",
                                   widget=False)
    norm: str = param("aux", "standardize target features by D_aux's statistics (aux) or the scored set's own "
                             "(scored_set, the authors'; transductive)", choices=("aux", "scored_set"))

    def __post_init__(self) -> None:
        if self.norm not in ("aux", "scored_set"):
            raise ValueError(f"probe's norm must be aux or scored_set (got {self.norm!r})")
        self.settings()  # checks the ranges

    def settings(self, base: ProbeSettings = FIT_DEFAULTS) -> ProbeSettings:
        """The fit's settings, each unset one taken from `base`."""
        return ProbeSettings(**{f.name: getattr(base, f.name) if getattr(self, f.name) is None else getattr(self, f.name)
                                for f in fields(ProbeSettings)})


def fit(lm: LanguageModel, texts: Sequence[str], labels, params: ProbeParams, *, train: np.ndarray, split: dict,
        seed: int, bos: str = "auto", batch_tokens: int | None = None, progress: Progress | None = None,
        score_all: bool = False) -> tuple[ProbeFit, np.ndarray | None]:
    """Fit on the non-members among rows `train` (D_aux); with `score_all`, every text's score too."""
    y = check_labels(labels)
    texts = [str(t) for t in texts]
    aux_rows = [i for i in np.asarray(train) if y[i] == 0]
    probe = training.fit_probe(lm, [texts[i] for i in aux_rows], params.settings(), seed=seed, split=split,
                               source=f"non-members of the fit split ({split['source']})", progress=progress)
    if not score_all:
        return probe, None
    return probe, probe.logits(probe.features(lm, texts), norm=params.norm)


def load_probe(path: Any) -> ProbeFit:
    """A `ProbeFit` saved by `mia fit --method probe` (what `--param classifier=FOLDER` names)."""
    return fitted.ProbeFit.load(path)


def prepare(stats: list[TokenStats], params: ProbeParams, *, lm: LanguageModel, classifier: Any) -> list[float]:
    """Every scored text's probe logit: one target pass per wrapped text (set-level under `norm="scored_set"`)."""
    probe = fitted.as_probe(classifier)
    given = {f.name: getattr(params, f.name) for f in fields(ProbeSettings) if getattr(params, f.name) is not None}
    own = probe.spec["settings"]
    if any(own[k] != v for k, v in given.items()):
        raise ValueError(f"this probe was fitted with {own}, not {given}")
    return [float(v) for v in probe.score_texts(lm, [s.text for s in stats], norm=params.norm)]


@register("probe", access=AccessNeeds(further_passes=True, gradients=True,
                                      why="the weights in process: hidden states of its own prompt-wrapped text, and "
                                          "gradients to fine-tune a proxy copy"),
          lesson=630, paper=Paper("Liu et al.", 2024, "https://arxiv.org/abs/2406.01333",
                                  "Probing Language Models for Pre-training Data Detection", "ACL 2024"),
          fails=("It needs at least a few hundred known non-members of the scored distribution and a fine-tune of a "
                 "copy of the model; the probe learns what fine-tuning does to the proxy, which may not be what "
                 "pretraining did to the target."),
          view=TokenView("the per-token output shown with Probe, which scores the text as a whole (for orientation "
                         "only)", "the tokens it looked at"),
          label="Probe (activations)", params=ProbeParams, needs=("stats", "lm", "classifier"), token_level=False,
          prepare=prepare, supervised=Supervised("classifier", fit, load_probe),
          reading=lambda v: f"a linear probe on the model's activations gives {v:.2f} (log-odds of 'member' learned "
                            "from a proxy fine-tune); it is only as good as the known non-members it learned from.",
          formula=r"\mathrm{score}(x) = w_{l^*}^\top \tilde h_{l^*}(x),\ "
                  r"w_{l^*} = \text{logistic probe: proxy fine-tuned on } A \text{ vs } B",
          idea="Fine-tune a copy of the model on half of some known non-members, teach a linear probe to tell that half "
               "from the other by the copy's activations, then read the real model's activations with it.",
          cost="1 pass per text on its prompt-wrapped copy; once per run: a proxy fine-tune and 2 passes per known "
               "non-member",
          extra_passes=lambda p: 1,
          summary="Supervised (by a proxy): a linear probe on one layer's last-token activations, trained to tell texts "
                  "a fine-tuned copy learned from texts it did not; score = the probe's logit on the target.")
def probe(stats: TokenStats, params: ProbeParams, *, lm: LanguageModel, classifier: Any, context: float) -> Score:
    """The probe's logit of the text (`context`, from `prepare`); token scores shown are the target's log-probs."""
    require_tokens(stats)
    fit_value = fitted.as_probe(classifier)
    details = {"layer": fit_value.layer, "dev_auc": fit_value.spec["dev_auc"], "lr": fit_value.spec["settings"]["lr"],
               "aux": fit_value.spec["aux"]["source"], "norm": params.norm, "supervised": fit_value.describe(),
               "in_training_split": fit_value.trained_on(stats.text)}
    return Score(float(context), stats.logprob.astype(np.float64), np.ones(stats.n_scored, bool), details)


__all__ = ["ProbeParams", "ProbeSettings", "fit", "load_probe", "prepare", "probe"]

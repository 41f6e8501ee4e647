"""A fitted Probe: the chosen layer's probe weights and the target's standardizer, saved without pickle."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ...model.language_model import LanguageModel
from ..fitted_store import check_model, load_fitted, save_fitted, trained_on
from .activations import Progress, last_token_features
from .linear import standardize, standardizer

FORMAT = "mia-lens-probe/1"
ARRAYS_FILE = "probe.npz"
NORMS = ("aux", "scored_set")


@dataclass(frozen=True)
class ProbeFit:
    """Probe weights w (d,) of layer `spec["layer"]`, and the mean, std and kept dimensions of the **target's** features
    of that layer on D_aux (for `norm="aux"`).

    spec : JSON-able: model name and fingerprint, the fit's settings (LR, epochs, LoRA rank, max tokens), the chosen
        layer and every layer's dev AUC, D_aux's source and size, A/B sizes, and the split it came from.
    """

    spec: dict
    weights: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    keep: np.ndarray

    @property
    def layer(self) -> int:
        return int(self.spec["layer"])

    def features(self, lm: LanguageModel, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        """(n, d) the target's layer-l* features of texts (one pass each on the wrapped text)."""
        self.check(lm)
        found = last_token_features(lm.model, lm.tokenizer, list(texts), max_tokens=self.spec["settings"]["max_tokens"],
                                    pad_id=lm.pad_id, progress=progress)
        return found[:, self.layer]

    def logits(self, features: np.ndarray, *, norm: str = "aux") -> np.ndarray:
        """(n, d) target features → (n,) wᵀh̃ (higher = member); h̃ standardized by D_aux's target statistics, or by
        the scored set's own (`norm="scored_set"`, the authors')."""
        x = np.asarray(features, dtype=np.float64)[:, None]  # (n, 1, d)
        if norm == "scored_set":
            mean, std, keep = standardizer(x)
            keep = keep & self.keep[None]
        elif norm == "aux":
            mean, std, keep = self.mean[None], self.std[None], self.keep[None]
        else:
            raise ValueError(f"probe's norm must be one of {', '.join(NORMS)} (got {norm!r})")
        return standardize(x, mean, std, keep)[:, 0] @ self.weights

    def score_texts(self, lm: LanguageModel, texts: Sequence[str], *, norm: str = "aux") -> np.ndarray:
        """(n,) probe logits of texts under the target."""
        return self.logits(self.features(lm, texts), norm=norm)

    def describe(self) -> str:
        """One line for reports: what the probe learned from, and the layer it chose."""
        s, a = self.spec["split"], self.spec["aux"]
        return (f"supervised: linear probe on layer {self.layer} (dev AUC {self.spec['dev_auc'][self.layer]:.3f}) of a "
                f"proxy fine-tuned on {a['n_a']} of {a['n']} known non-members ({a['source']}); from "
                f"{s['train_fraction']:.0%} of {s['source'] or 'the data'}, seed {s['seed']}")

    def trained_on(self, text: str) -> bool:
        """True when the text was one of the fit's rows (its score there is not a test)."""
        return trained_on(self.spec, text)

    def check(self, lm: LanguageModel) -> None:
        """ValueError unless this probe was fitted on this model."""
        check_model(self.spec, lm, what="probe", why="activations differ between models", method="probe")

    def save(self, folder: str | Path) -> Path:
        """`spec.json` + `probe.npz` (plain arrays, no pickle) in `folder`."""
        arrays = {"weights": self.weights, "mean": self.mean, "std": self.std, "keep": self.keep}
        return save_fitted(folder, self.spec, arrays, arrays_file=ARRAYS_FILE)

    @classmethod
    def load(cls, folder: str | Path) -> "ProbeFit":
        """Rebuild a saved probe (`allow_pickle=False`); shapes checked against the spec."""
        spec, z = load_fitted(folder, arrays_file=ARRAYS_FILE, fmt=FORMAT, what="probe", command="mia fit --method probe")
        try:
            fit = cls(spec, z["weights"], z["mean"], z["std"], z["keep"].astype(bool))
        except KeyError:
            raise ValueError(f"{Path(folder) / ARRAYS_FILE} lacks arrays its spec.json names") from None
        d = spec.get("hidden_size")
        if any(a.shape != (d,) for a in (fit.weights, fit.mean, fit.std, fit.keep)):
            raise ValueError(f"{Path(folder) / ARRAYS_FILE} does not match the shapes in its spec.json")
        return fit


def as_probe(value) -> ProbeFit:
    """A `ProbeFit`, or one loaded from its folder."""
    if isinstance(value, ProbeFit):
        return value
    if isinstance(value, (str, Path)):
        return ProbeFit.load(value)
    raise TypeError(f"classifier must be a ProbeFit or its folder (got {type(value).__name__})")

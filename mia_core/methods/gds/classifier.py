"""The GDS classifier: an MLP on gradient features (paper §4.4, App. A.6), saved as plain arrays (no pickle)."""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ...model.language_model import LanguageModel
from ...version import package_versions
from .features import FEATURES, GdsSettings, Progress, feature_names, gradient_features
from ..fitted_store import check_model, load_fitted, save_fitted, trained_on
from ..labelled import check_labels

#: Hidden layers of the MLP (the paper's 128, 64); Adam, lr 1e-3, early stopping.
MLP_HIDDEN = (128, 64)
FORMAT = "mia-lens-gds-classifier/1"
ARRAYS_FILE = "mlp.npz"




def fit_mlp(features: np.ndarray, labels, *, seed: int = 0):
    """The paper's classifier: StandardScaler + MLPClassifier(128, 64), Adam lr 1e-3, early stopping."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    mlp = MLPClassifier(hidden_layer_sizes=MLP_HIDDEN, solver="adam", learning_rate_init=1e-3,
                        early_stopping=True, random_state=seed)
    pipe = Pipeline([("scale", StandardScaler()), ("mlp", mlp)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return pipe.fit(np.asarray(features, dtype=np.float64), check_labels(labels))


@dataclass(frozen=True)
class GdsClassifier:
    """A fitted GDS MLP as plain arrays (standardiser, ReLU layers, logistic output) and its spec.

    spec : JSON-able: model name and fingerprint, LoRA settings, feature names, MLP settings, and the
        split it learned from (fraction, seed, counts, ids of the training rows).
    """

    spec: dict
    mean: np.ndarray
    scale: np.ndarray
    coefs: tuple[np.ndarray, ...]
    intercepts: tuple[np.ndarray, ...]

    @classmethod
    def from_pipeline(cls, pipe, spec: dict) -> "GdsClassifier":
        scaler, mlp = pipe[0], pipe[-1]
        if list(mlp.classes_) != [0, 1] or mlp.out_activation_ != "logistic":
            raise ValueError("expected a binary MLP on 0/1 labels")
        return cls(spec, scaler.mean_.copy(), scaler.scale_.copy(), tuple(c.copy() for c in mlp.coefs_),
                   tuple(b.copy() for b in mlp.intercepts_))

    @property
    def settings(self) -> GdsSettings:
        return GdsSettings(**self.spec["lora"])

    @property
    def feature_names(self) -> list[str]:
        return list(self.spec["feature_names"])

    def log_odds(self, features: np.ndarray) -> np.ndarray:
        """(n, n_features) → (n,) member log-odds (the MLP's output before the logistic)."""
        h = (np.asarray(features, dtype=np.float64) - self.mean) / self.scale
        for w, b in zip(self.coefs[:-1], self.intercepts[:-1]):
            h = np.maximum(h @ w + b, 0.0)
        return (h @ self.coefs[-1] + self.intercepts[-1])[:, 0]

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        """(n,) member probabilities (= sklearn's `predict_proba(X)[:, 1]`)."""
        from scipy.special import expit

        return expit(self.log_odds(features))

    def describe(self) -> str:
        """One line for reports: supervised, and which split it learned from."""
        s = self.spec["split"]
        return (f"supervised: MLP trained on {s['n_train']} labelled texts ({s['train_members']} members, "
                f"{s['train_nonmembers']} non-members) = {s['train_fraction']:.0%} of {s['source'] or 'the data'}, "
                f"stratified, seed {s['seed']}")

    def trained_on(self, text: str) -> bool:
        """True when the text was one of the classifier's training rows (its score there is not a test)."""
        return trained_on(self.spec, text)

    def check(self, lm: LanguageModel, settings: GdsSettings | None = None) -> None:
        """ValueError unless this classifier's feature spec matches the model (and the settings given)."""
        check_model(self.spec, lm, what="GDS classifier", why="gradient features differ between models", method="gds")
        if settings is not None and settings != self.settings:
            raise ValueError(f"this GDS classifier was fitted with LoRA settings {self.settings}, not {settings}")
        if feature_names(lm.model) != self.feature_names:
            raise ValueError("this GDS classifier's feature names (LoRA target modules) do not match the model's")

    def score_texts(self, lm: LanguageModel, texts: Sequence[str], *, batch_tokens: int | None = None,
                    progress: Progress | None = None) -> np.ndarray:
        """(n,) member log-odds of texts (higher = member); each distinct text's features once, in batches."""
        self.check(lm)
        distinct = list(dict.fromkeys(map(str, texts)))
        values = dict(zip(distinct, self.log_odds(gradient_features(lm, distinct, self.settings, batch_tokens=batch_tokens,
                                                                     progress=progress))))
        return np.array([values[str(t)] for t in texts], dtype=np.float64)

    def save(self, folder: str | Path) -> Path:
        """`spec.json` + `mlp.npz` (plain arrays, no pickle; `fitted_store`) in `folder` (created; its parent must exist)."""
        arrays = {"mean": self.mean, "scale": self.scale}
        arrays.update({f"coef_{i}": c for i, c in enumerate(self.coefs)})
        arrays.update({f"intercept_{i}": b for i, b in enumerate(self.intercepts)})
        return save_fitted(folder, self.spec, arrays, arrays_file=ARRAYS_FILE)

    @classmethod
    def load(cls, folder: str | Path) -> "GdsClassifier":
        """Rebuild a saved classifier (`allow_pickle=False`); shapes are checked against the spec."""
        folder = Path(folder)
        spec, z = load_fitted(folder, arrays_file=ARRAYS_FILE, fmt=FORMAT, what="GDS classifier",
                              command="mia fit --method gds")
        n_layers = len(spec["mlp"]["hidden"]) + 1
        try:
            mean, scale = z["mean"], z["scale"]
            coefs = tuple(z[f"coef_{i}"] for i in range(n_layers))
            intercepts = tuple(z[f"intercept_{i}"] for i in range(n_layers))
        except KeyError:
            raise ValueError(f"{folder / ARRAYS_FILE} lacks arrays its spec.json names") from None
        widths = [len(spec["feature_names"])] + list(spec["mlp"]["hidden"]) + [1]
        if mean.shape != scale.shape or mean.shape != (widths[0],) or any(
                c.shape != (a, b) or i.shape != (b,) for c, i, a, b in zip(coefs, intercepts, widths, widths[1:])):
            raise ValueError(f"{folder / 'mlp.npz'} does not match the shapes in its spec.json")
        return cls(spec, mean, scale, coefs, intercepts)


def as_classifier(classifier) -> GdsClassifier:
    """A `GdsClassifier`, or one loaded from a folder path."""
    if isinstance(classifier, GdsClassifier):
        return classifier
    if isinstance(classifier, (str, Path)):
        return GdsClassifier.load(classifier)
    raise TypeError(f"classifier must be a GdsClassifier or its folder (got {type(classifier).__name__})")


def fit_classifier(features: np.ndarray, labels, lm: LanguageModel, *, settings: GdsSettings, seed: int, split: dict) -> GdsClassifier:
    """Fit the MLP on feature rows and record what it learned from (`split`) in its spec."""
    pipe = fit_mlp(features, labels, seed=seed)
    spec = {
        "format": FORMAT, "method": "gds", "supervised": True,
        "model": {"name": lm.name, "fingerprint": lm.fingerprint, "dtype": str(lm.dtype)},
        "lora": asdict(settings), "features_per_matrix": list(FEATURES), "feature_names": feature_names(lm.model),
        "mlp": {"hidden": list(MLP_HIDDEN), "solver": "adam", "learning_rate_init": 1e-3, "early_stopping": True,
                "seed": seed, "n_iter": int(pipe[-1].n_iter_)},
        "split": split, "versions": package_versions("torch", "peft", "transformers", "scikit-learn"),
    }
    return GdsClassifier.from_pipeline(pipe, spec)

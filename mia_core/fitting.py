"""Supervised methods fitted on labelled texts: one seeded stratified split, the method's own `fit` hook, a record.

Nothing here names a method: a supervised method declares `Supervised(fits, fit, load)` where it is registered
(`mia_core.api.Supervised`); its fitted value has `describe()`, `trained_on(text)` and `save(folder)`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .api import METHODS, MethodSpec, get_method
from .methods.labelled import check_labels, split_record, stratified_split
from .model.language_model import LanguageModel


@dataclass(frozen=True)
class FitSplit:
    """Fit the chosen supervised methods on a seeded stratified share of the labelled texts; the rest is held out."""

    train_fraction: float = 0.3
    seed: int = 0
    """Seed of the split and of the fit."""
    batch_tokens: int | None = None
    """Padded tokens per batch of the fit's model passes (None: the model's default)."""

    def __post_init__(self) -> None:
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"the training share must be in (0, 1) (got {self.train_fraction})")


@dataclass(frozen=True)
class Fitted:
    """A supervised method fitted on the rows `train_idx` of labelled texts.

    value : what it fitted (e.g. a classifier; `save(folder)` writes it, the method's `load` reads it back).
    record : the split it learned from (fraction, seed, counts, training ids and text hashes).
    scores : every text's score from the fit's own passes (training rows included), when asked for.
    """

    method: str
    value: Any
    train_idx: np.ndarray
    test_idx: np.ndarray
    record: dict
    scores: np.ndarray | None = None


def supervised_methods() -> list[str]:
    """The registered methods that learn from labelled texts."""
    return [name for name, spec in METHODS.items() if spec.supervised is not None]


def supervised_spec(method: str) -> MethodSpec:
    """The method, or a ValueError naming the supervised ones."""
    spec = get_method(method)
    if spec.supervised is None:
        raise ValueError(f"method {method!r} is not supervised (supervised methods: {', '.join(supervised_methods())})")
    return spec


def fit_supervised(lm: LanguageModel, method: str, texts: Sequence[str], labels, *, ids=None, split: FitSplit = FitSplit(),
                   params: dict | None = None, bos: str = "auto", source: str = "",
                   progress: Callable[[int, int], None] | None = None, score_all: bool = False) -> Fitted:
    """Split labelled texts (stratified, seeded) and fit `method` on the training rows; with `score_all`, also every
    text's score from the same passes (the evaluation's held-out rows then need no second pass)."""
    spec = supervised_spec(method)
    y = check_labels(labels)
    texts = [str(t) for t in texts]
    train, test = stratified_split(y, train_fraction=split.train_fraction, seed=split.seed)
    record = split_record(y, train, test, ids, train_fraction=split.train_fraction, seed=split.seed, source=source,
                          texts=texts)
    value, scores = spec.supervised.fit(lm, texts, y, spec.make_params(**(params or {})), train=train, split=record,
                                        seed=split.seed, bos=bos, batch_tokens=split.batch_tokens, progress=progress,
                                        score_all=score_all)
    return Fitted(method, value, train, test, record, scores)


def given_fit(method: str, inputs: dict) -> Any | None:
    """The fitted value of a supervised method given in `inputs` (the value, or the folder it was saved in)."""
    spec = get_method(method)
    if spec.supervised is None or inputs.get(spec.supervised.fits) is None:
        return None
    return spec.supervised.resolve(inputs[spec.supervised.fits])

"""The labelled split a supervised method learns from: 0/1 labels, a seeded stratified train/test split, its record."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..model.identity import text_sha256

#: sklearn's early stopping holds out 10% of the training rows, stratified: it needs a few of each class.
MIN_TRAIN_PER_CLASS = 6


def check_labels(labels) -> np.ndarray:
    """0/1 labels (1 = member) with both classes present, as int64."""
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be a non-empty list of 0/1 (1 = member)")
    y = y.astype(np.int64)
    if y.min() == y.max():
        raise ValueError("a supervised method needs both members (1) and non-members (0) in the labelled data")
    return y


def stratified_split(labels, *, train_fraction: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split into (train rows, test rows), each sorted (the paper: 30% / 70%)."""
    from sklearn.model_selection import train_test_split

    if not 0 < train_fraction < 1:
        raise ValueError(f"train fraction must be in (0, 1) (got {train_fraction})")
    y = check_labels(labels)
    train, test = train_test_split(np.arange(y.size), train_size=train_fraction, stratify=y, random_state=seed)
    n_pos = int(y[train].sum())
    if min(n_pos, train.size - n_pos) < MIN_TRAIN_PER_CLASS:
        raise ValueError(f"the training split has {n_pos} members and {train.size - n_pos} non-members; a supervised "
                         f"method needs at least {MIN_TRAIN_PER_CLASS} of each (use more texts or a larger train "
                         "fraction)")
    return np.sort(train), np.sort(test)


def split_record(y: np.ndarray, train: np.ndarray, test: np.ndarray, ids, *, train_fraction: float, seed: int,
                 source: str, texts: Sequence[str] | None = None) -> dict:
    """What a supervised method learned from: fraction, seed, counts per class, ids (and text hashes) of the training rows."""
    ids = list(range(y.size)) if ids is None else list(ids)
    return {"source": source, "train_fraction": train_fraction, "seed": seed, "stratified": True,
            "n_total": int(y.size), "n_train": int(train.size), "n_test": int(test.size),
            "train_members": int(y[train].sum()), "train_nonmembers": int(train.size - y[train].sum()),
            "test_members": int(y[test].sum()), "test_nonmembers": int(test.size - y[test].sum()),
            "train_ids": [_plain(ids[i]) for i in train],
            "train_sha256": [text_sha256(str(texts[i])) for i in train] if texts is not None else []}


def _plain(value):
    """numpy scalars → Python values (for JSON)."""
    return value.item() if isinstance(value, np.generic) else value

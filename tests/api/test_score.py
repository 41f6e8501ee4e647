"""`lowest_k`: the first max(1, ⌊k·n⌋) tokens of a stable ascending sort, and their mean, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from mia_core.api.score import lowest_k


def stable_sort_oracle(scores: np.ndarray, k: float) -> tuple[float, np.ndarray]:
    """The reference selection: a stable argsort of every token, its first ⌊k·n⌋ (at least 1), their mean."""
    n_sel = max(1, int(len(scores) * k))
    chosen = np.argsort(scores, kind="stable")[:n_sel]
    mask = np.zeros(len(scores), bool)
    mask[chosen] = True
    return float(np.mean(scores[chosen], dtype=np.float64)), mask


@pytest.mark.parametrize("kind", ["normal", "ties", "nan", "inf", "signed zeros"])
def test_lowest_k_equals_a_stable_sort_of_every_token(kind):
    rng = np.random.default_rng(7)
    for trial in range(300):
        n = int(rng.integers(1, 400))
        scores = {"normal": lambda: rng.normal(size=n),
                  "ties": lambda: rng.integers(-3, 3, size=n).astype(float),
                  "nan": lambda: np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
                  "inf": lambda: np.where(rng.random(n) < 0.1, -np.inf, np.round(rng.normal(size=n), 1)),
                  "signed zeros": lambda: rng.choice([-0.0, 0.0, 1.0, -1.0], size=n)}[kind]()
        k = float(rng.choice([0.01, 0.1, 0.2, 0.29, 0.5, 1.0]))
        value, mask = stable_sort_oracle(scores, k)
        got = lowest_k(scores, k)
        assert (got.selected == mask).all(), (trial, k)
        assert got.value == value or (np.isnan(value) and np.isnan(got.value)), (trial, k)


def test_the_earliest_ties_are_chosen():
    got = lowest_k(np.array([2.0, 1.0, 1.0, 1.0, 0.5, 3.0]), 0.5)  # 3 of 6: 0.5, then the first two 1.0s
    assert got.selected.tolist() == [False, True, True, False, True, False]
    assert got.value == (0.5 + 1.0 + 1.0) / 3

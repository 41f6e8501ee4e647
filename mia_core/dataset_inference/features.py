"""Dataset-inference features (Maini et al. 2024, authors' `di.py` / `metrics.py`): our methods' scores per text.

Tool default (`METHODS-FIELD.md` §8): every method that needs only the target's statistics, at its
default parameters; Min-K% at the reference's seven ks and its mirror "max_k" (mean of the highest
k log-probs, the reference's `k_min_probs`, whose name is inverted); plus `lowercase` (a second pass
of the target) and `ref` (when a reference model is given). Every feature is oriented higher =
member. Deviations: the reference's six NL-Augmenter perturbation ratios and its four fixed
reference models need external assets and are not computed; the reference's `ppl = exp(mean NLL)`
is our `loss` (a monotone transform of it; the features are z-scored either way).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..methods import stats_only_methods
from ..api import TokenStats, lowest_k
from ..model.language_model import LanguageModel
from ..scoring import score_texts, text_stats

#: The reference's k grid for its min/max-k features.
DI_KS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)


def max_k(stats: TokenStats, k: float) -> float:
    """Mean of the `max(1, int(k·n))` highest log-probs (= minus the mean of the k lowest NLLs)."""
    if stats.n_scored == 0:
        raise ValueError(f"no token to score in text {stats.text[:40]!r}")
    return -lowest_k(-stats.logprob.astype(np.float64), k).value


def default_methods() -> list[str]:
    """The registry's statistics-only methods taken at their default parameters (min_k is taken per k instead)."""
    return [m for m in stats_only_methods() if m != "min_k"]


def feature_table(lm: LanguageModel, texts: Sequence[str], *, stats: Sequence[TokenStats] | None = None,
                  lowercase: bool = True, ref_model: LanguageModel | None = None, bos: str = "auto",
                  long_text: str = "sliding", progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """(n_texts, n_features) feature matrix of the texts, one column per feature, higher = member.

    Columns: the statistics-only methods at their defaults, `min_k@K` and `max_k@K` for K in `DI_KS`,
    then `lowercase` (when `lowercase`) and `ref` (when `ref_model` is given). The target's statistics
    are computed once (or taken from `stats`) and come from the on-disk cache when already computed.
    """
    texts = [str(t) for t in texts]
    if stats is None:
        stats = text_stats(lm, texts, bos=bos, long_text=long_text, progress=progress)
    where = {"bos": bos, "long_text": long_text, "stats": stats}
    table = score_texts(lm, texts, default_methods(), **where)
    for k in DI_KS:
        table[f"min_k@{k}"] = score_texts(lm, texts, ["min_k"], k=k, **where)["min_k"].to_numpy()
        table[f"max_k@{k}"] = [max_k(s, k) for s in stats]
    if lowercase:
        table["lowercase"] = score_texts(lm, texts, ["lowercase"], progress=progress, **where)["lowercase"].to_numpy()
    if ref_model is not None:
        table["ref"] = score_texts(lm, texts, ["ref"], ref_model=ref_model, **where)["ref"].to_numpy()
    return table.astype(np.float64)

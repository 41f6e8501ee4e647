"""SimMIA's and SimMIA*'s parameters (the authors' defaults), read by their declarations and their sampler."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...api import is_int, param
from ...blackbox.simmia import MINILM, MODES

#: Tokens generated per sample: the authors' `max_new_tokens=3` (enough for one word).
NEW_TOKENS = 3


@dataclass(frozen=True)
class SimMiaStarParams:
    """Parameters of SimMIA* (the sampling both variants share)."""

    n_samples: int = param(100, "N: next words sampled per position and context (the authors: 100 on WikiMIA and "
                           "MIMIR, 10 on WikiMIA-25)", low=1, high=100, step=1)
    n_shots: int = param(7, "known non-members joined into the prefix P (the first n_shots helper texts; the "
                         "authors: 7 on WikiMIA, 10 on MIMIR)", low=1, high=100, step=1)
    top_k: int = param(20, "sample among the k most likely tokens (the authors: 20; 0: no cut)", low=0, high=1000,
                       step=1)
    temperature: float = param(1.0, "sampling temperature (> 0; the authors: 1.0)", low=0.05, high=5.0, step=0.05)
    mode: str = param("ours", '"ours" (P\'s texts each end with a blank line; the spec\'s smoothing) or "reference" '
                      "(the authors' code: P joined with \"\", their smoothing)", choices=MODES)
    seed: int = param(42, "seed of the sampling; each prompt's draws are seeded by (seed, context, position, text)",
                      widget=False)

    def __post_init__(self) -> None:
        for name, low in (("n_samples", 1), ("n_shots", 1), ("top_k", 0), ("seed", 0)):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low} (got {value!r})")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not math.isfinite(t) \
                or t <= 0:
            raise ValueError(f"temperature must be a finite number > 0 (got {t!r})")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES} (got {self.mode!r})")


@dataclass(frozen=True)
class SimMiaParams(SimMiaStarParams):
    """Parameters of SimMIA: SimMIA*'s and the word embedder."""

    embedding: str = param(MINILM, "the registered word embedder (mia_core.blackbox.simmia.EMBEDDERS; the authors: "
                           "all-MiniLM-L6-v2)", widget=False)
    exact_match_number: bool = param(False, "similarity ±1 for a number against a number (the authors' MIMIR "
                                     "dm_mathematics setting)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.embedding, str) or not self.embedding:
            raise ValueError(f"embedding must name a registered word embedder (got {self.embedding!r})")
        if not isinstance(self.exact_match_number, (bool, np.bool_)):
            raise ValueError(f"exact_match_number must be True or False (got {self.exact_match_number!r})")

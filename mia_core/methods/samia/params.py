"""SaMIA's parameters (the authors' defaults), read by its declaration and its sampler (no torch here)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...api import is_int, param


@dataclass(frozen=True)
class SamiaParams:
    """Parameters of SaMIA (the authors' defaults)."""

    n_samples: int = param(10, "sampled continuations per text (an integer ≥ 1)", low=1, high=20,
                           step=1)  # high: the dashboard's bound (docs/security.md), as for max_length
    prefix_fraction: float = param(0.5, "ρ: the fraction of the text's words given as the prompt, in (0, 1)",
                                   low=0.05, high=0.95, step=0.05)
    max_length: int = param(1024, "tokens of prompt + continuation (≥ 2; capped at the model's context)", low=2,
                            high=2048, step=1)
    temperature: float = param(1.0, "sampling temperature (> 0)", low=0.05, high=5.0, step=0.05)
    top_k: int = param(50, "sample among the k most likely tokens (0: no top-k cut)", low=0, high=1000, step=1)
    top_p: float = param(1.0, "nucleus sampling mass in (0, 1] (1: no cut)", low=0.05, high=1.0, step=0.05)
    zlib: bool = param(False, "multiply each recall by the zlib-compressed size of its candidate (the authors' "
                       "`--zlib`)")
    truncate_candidate: bool = param(False, "cut each candidate to the reference's word count before comparing (not "
                                     "in the authors' code)")
    seed: int = param(0, "seed of the sampling; each text's generator is seeded by (seed, sha256(text))", widget=False)

    def __post_init__(self) -> None:
        for name, low in (("n_samples", 1), ("max_length", 2), ("top_k", 0), ("seed", 0)):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low} (got {value!r})")
        if not _is_real(self.prefix_fraction) or not 0 < self.prefix_fraction < 1:
            raise ValueError(f"prefix_fraction must be in (0, 1) (got {self.prefix_fraction!r})")
        if not _is_real(self.temperature) or not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature!r})")
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p!r})")
        for name in ("zlib", "truncate_candidate"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False (got {getattr(self, name)!r})")


def _is_real(value) -> bool:
    """A finite number that is not a bool."""
    return (is_int(value) or isinstance(value, (float, np.floating))) and math.isfinite(value)

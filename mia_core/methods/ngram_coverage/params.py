"""N-gram coverage's parameters (the authors' defaults; METHODS-FIELD.md §14), read by its declaration and its
engine (no torch, no NLTK here)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...api import is_int, param

NORMALIZATIONS = ("gen_length", "ref_length", "total_length")
AGGREGATES = ("max", "min", "median", "mean")
STATISTICS = ("coverage", "creativity")
MODES = ("ours", "reference")  # recall's `mode` words too: one `--param mode=…` means the same to both methods


@dataclass(frozen=True)
class NgramCoverageParams:
    """Parameters of the N-gram coverage attack (defaults: the authors' scripts and README)."""

    n_samples: int = param(20, "m: sampled continuations per text (an integer ≥ 1)", low=1, high=50,
                           step=1)  # high: the dashboard's bound (docs/security.md)
    ngram: int = param(4, "L: the shortest run of words a continuation must share with the true suffix (≥ 1)",
                       low=1, high=12, step=1)
    suffix_fraction: float = param(0.5, "ρ: the fraction of the text's words removed from its end (the suffix), in "
                                   "(0, 1); k = max(1, min(int(ρ·|W|), |W| − 1)) words", low=0.05, high=0.95,
                                   step=0.05)
    words_from_end: int = param(0, "a fixed number of words removed from the end instead of ρ (0: use ρ)", low=0,
                                high=512, step=1)
    max_new_tokens: int = param(0, "tokens sampled per continuation (0: the suffix's token count, the authors' "
                                "word-mode setting); capped at the model's context", low=0, high=2048, step=1)
    task_prompt: str = param("", "text put before the prefix (the authors use \"\" or \"Continue the text: \" for "
                             "base models)")
    temperature: float = param(1.0, "sampling temperature (> 0)", low=0.05, high=5.0, step=0.05)
    top_p: float = param(0.95, "nucleus sampling mass in (0, 1] (1: no cut)", low=0.05, high=1.0, step=0.05)
    normalization: str = param("gen_length", "what the covered words are divided by: the continuation's words "
                               "(gen_length), max(continuation, suffix) (ref_length), or their harmonic form "
                               "(total_length)", choices=NORMALIZATIONS)
    mode: str = param("ours", "how a run is found in the true suffix: as a sequence of its words (ours), or as the "
                      "authors' code does, its Moses-detokenized text as a character substring of the suffix "
                      "(reference: \"he lazy dog\" then matches \"the lazy dog\")", choices=MODES)
    unique: bool = param(True, "count a run whose words were already counted in the same continuation once")
    aggregate: str = param("max", "how the continuations' coverages make the score (the authors' tables: max)",
                           choices=AGGREGATES)
    statistic: str = param("coverage", "coverage of runs ≥ L words, or the creativity variant: coverage summed over "
                           "run lengths ci_min..ci_max", choices=STATISTICS)
    ci_min: int = param(1, "the creativity variant's shortest run length (≥ 1)", low=1, high=32, step=1)
    ci_max: int = param(12, "the creativity variant's longest run length (≥ ci_min)", low=1, high=32, step=1)
    seed: int = param(0, "seed of the sampling; each text's generators are seeded by (seed, sha256(text), j)",
                      widget=False)

    def __post_init__(self) -> None:
        for name, low in (("n_samples", 1), ("ngram", 1), ("words_from_end", 0), ("max_new_tokens", 0),
                          ("ci_min", 1), ("ci_max", 1), ("seed", 0)):
            value = getattr(self, name)
            if not is_int(value) or value < low:
                raise ValueError(f"{name} must be an integer ≥ {low} (got {value!r})")
        if self.ci_max < self.ci_min:
            raise ValueError(f"ci_max must be ≥ ci_min (got {self.ci_max} < {self.ci_min})")
        if not _is_real(self.suffix_fraction) or not 0 < self.suffix_fraction < 1:
            raise ValueError(f"suffix_fraction must be in (0, 1) (got {self.suffix_fraction!r})")
        if not _is_real(self.temperature) or not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (got {self.temperature!r})")
        if not _is_real(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p!r})")
        if not isinstance(self.task_prompt, str):
            raise ValueError(f"task_prompt must be a string (got {self.task_prompt!r})")
        if not isinstance(self.unique, (bool, np.bool_)):
            raise ValueError(f"unique must be True or False (got {self.unique!r})")
        for name, allowed in (("normalization", NORMALIZATIONS), ("aggregate", AGGREGATES),
                              ("statistic", STATISTICS), ("mode", MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)} (got {getattr(self, name)!r})")


def _is_real(value) -> bool:
    """A finite number that is not a bool."""
    return (is_int(value) or isinstance(value, (float, np.floating))) and math.isfinite(value)

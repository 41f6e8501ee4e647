"""Helper texts: known non-members (or members) a method uses as a prefix or a reference population.

ReCaLL and Con-ReCall put known texts in front of the scored one; CAMIA calibrates its signals
against known non-members. Every public port draws them from the evaluated benchmark itself, which
leaks labels (docs/methods.md, "Helper texts"): here they come from a set the user names, or from a
seeded split of a labelled set whose rows are then scored by no method. They are never scored texts
(`check_disjoint`), and a run records which texts were used (`HelperTexts.describe`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..model.identity import text_sha256
from ..api import HELPER_NEEDS, TokenStats

#: What each kind of helper text is, in words for messages and reports.
ROLES = {
    "shots_nonmembers": "known non-members (prefix shots)",
    "shots_members": "known members (prefix shots)",
    "reference": "reference population of known non-members",
}


@dataclass(frozen=True)
class HelperTexts:
    """Known texts of one role and where they came from."""

    texts: tuple[str, ...]
    role: str
    source: str = "given"

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown helper role {self.role!r}; known: {sorted(ROLES)}")
        texts = tuple(str(t) for t in self.texts if str(t).strip())
        if not texts:
            raise ValueError(f"the {ROLES[self.role]} hold no non-empty text")
        object.__setattr__(self, "texts", texts)

    def describe(self) -> dict[str, Any]:
        """Which texts were used, for the run record: role, source, count and every text's SHA-256."""
        return {"role": self.role, "source": self.source, "n": len(self.texts),
                "sha256": [text_sha256(t) for t in self.texts]}



def as_helper_texts(value, role: str) -> HelperTexts:
    """`HelperTexts` from helper texts or a list of strings (from a file the caller read)."""
    if isinstance(value, HelperTexts):
        if value.role != role:
            raise ValueError(f"{role}= got {ROLES[value.role]} (role {value.role!r})")
        return value
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"{role}= must be a list of texts or HelperTexts (got {type(value).__name__})")
    return HelperTexts(tuple(value), role)


def check_disjoint(scored: Sequence[str], helpers: Sequence[HelperTexts]) -> None:
    """ValueError when a helper text is also a scored text (it would leak its label into the score)."""
    scored_set = set(scored)
    for group in helpers:
        shared = [t for t in group.texts if t in scored_set]
        if shared:
            preview = shared[0][:40] + ("…" if len(shared[0]) > 40 else "")
            raise ValueError(f"{len(shared)} of the {ROLES[group.role]} are also scored texts (e.g. {preview!r}); "
                             "helper texts must never be scored — take them from another set, or split them off "
                             "(mia eval --helper-seed)")


@dataclass(frozen=True)
class HelperSplit:
    """How many helper texts to split off a labelled set, and the seed of the split."""

    n_shots: int = 10
    """Known non-members (and, for Con-ReCall, members) taken as prefix shots."""
    reference_fraction: float = 0.3
    """Fraction of the non-members taken as CAMIA's reference population (the authors: 30%)."""
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.n_shots, bool) or not isinstance(self.n_shots, (int, np.integer)) or self.n_shots < 1:
            raise ValueError(f"n_shots must be an integer ≥ 1 (got {self.n_shots!r})")
        if not 0 < self.reference_fraction < 1:
            raise ValueError(f"reference_fraction must be in (0, 1) (got {self.reference_fraction!r})")


def split_helpers(labels, needs: Sequence[str], split: HelperSplit = HelperSplit()) -> dict[str, np.ndarray]:
    """Rows of a labelled set (1 = member) given to each helper role the methods need, disjoint, seeded.

    Shots are drawn first, then the reference population from the remaining non-members. The rows
    returned under "scored" are all the others: every method is scored and evaluated on them only.
    """
    y = np.asarray(labels).astype(np.int64)
    rng = np.random.default_rng(split.seed)
    free = {label: list(rng.permutation(np.flatnonzero(y == label))) for label in (0, 1)}
    out: dict[str, np.ndarray] = {}
    wanted = [r for r in HELPER_NEEDS if r in needs]
    for role in wanted:
        label = 1 if role == "shots_members" else 0
        n = split.n_shots if role != "reference" else int(round(split.reference_fraction * (y == 0).sum()))
        if n < 1 or n >= len(free[label]):
            kind = "members" if label else "non-members"
            raise ValueError(f"cannot split {max(n, 1)} {ROLES[role]} off {len(free[label])} remaining {kind}: "
                             "use a larger labelled set or fewer shots")
        out[role], free[label] = np.sort(np.array(free[label][:n], dtype=np.int64)), free[label][n:]
    taken = np.concatenate([v for v in out.values()]) if out else np.empty(0, np.int64)
    out["scored"] = np.setdiff1d(np.arange(y.size), taken)
    return out


@dataclass(frozen=True)
class ReferenceStats:
    """A reference population (helper texts) with the target's statistics of each, computed once per run."""

    helpers: HelperTexts
    stats: tuple[TokenStats, ...]

    def __post_init__(self) -> None:
        if len(self.stats) != len(self.helpers.texts) or any(
                s.text != t for s, t in zip(self.stats, self.helpers.texts)):
            raise ValueError("the reference statistics must be those of the reference texts, in order")

    @property
    def bos_policy(self) -> str:
        return self.stats[0].bos_policy

    def describe(self) -> dict[str, Any]:
        """The population's record (role, source, count, hashes) and its length range in scored tokens."""
        lengths = [s.n_scored for s in self.stats]
        return {**self.helpers.describe(), "n_tokens_min": min(lengths), "n_tokens_max": max(lengths)}

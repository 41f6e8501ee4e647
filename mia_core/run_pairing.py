"""Two evaluated runs compared on the texts both scored: which texts they share, and per method a paired test.

Texts are matched by content (the SHA-256 of the text, `model.identity.text_sha256`), not by row id: two uploaded
files may number their rows alike, and a score belongs to the text it was computed on (score files without their
texts, as `mia eval --scores-output` writes them, can be matched by id instead: `by="id"`). Each run's repeats of a text
count once (its first row), and a text labelled a member in one run and a non-member in the other is left out.
Runs that share only some texts are compared on those alone (and the sentence says so); fewer than
`MIN_PER_CLASS` shared members or non-members is refused, since DeLong's normal approximation and the bootstrap
both need more. ΔAUROC is always the second run's AUROC minus the first's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .model.identity import text_sha256
from .paired import BootstrapDelta, DeLong, delong, paired_bootstrap

#: Shared members and shared non-members each needed before two runs are compared as a pair.
MIN_PER_CLASS = 10


@dataclass(frozen=True)
class SharedTexts:
    """Row positions of the texts both runs scored, aligned (rows_a[i] and rows_b[i] are the same text)."""

    rows_a: np.ndarray
    rows_b: np.ndarray
    labels: np.ndarray
    n_a: int
    n_b: int
    conflicting: int

    @property
    def n_members(self) -> int:
        return int((self.labels == 1).sum())

    @property
    def n_nonmembers(self) -> int:
        return int((self.labels == 0).sum())


@dataclass(frozen=True)
class MethodPair:
    """One method's AUROCs in both runs on the shared texts: DeLong's test and the paired bootstrap interval."""

    method: str
    test: DeLong
    bootstrap: BootstrapDelta


@dataclass(frozen=True)
class RunPair:
    """Runs `first` and `second` (names such as "#1") compared: the shared texts, why not compared (or None), and
    the paired result of each method both ran."""

    first: str
    second: str
    shared: SharedTexts
    refused: str | None
    methods: list[MethodPair] = field(default_factory=list)


def shared_texts(data_a: pd.DataFrame, data_b: pd.DataFrame, *, by: str = "text") -> SharedTexts:
    """The texts (`text` or `id`, and `label` columns) of two runs that both scored, matched by the text's SHA-256
    (`by="text"`) or by id (`by="id"`)."""
    if by not in ("text", "id"):
        raise ValueError(f"texts are matched by 'text' or 'id' (got {by!r})")
    first_a = _first_rows(data_a[by], hashed=by == "text")
    first_b = _first_rows(data_b[by], hashed=by == "text")
    common = [h for h in first_a if h in first_b]
    label_a = data_a["label"].to_numpy()
    label_b = data_b["label"].to_numpy()
    agree = [h for h in common if label_a[first_a[h]] == label_b[first_b[h]]]
    rows_a = np.array([first_a[h] for h in agree], dtype=np.int64)
    rows_b = np.array([first_b[h] for h in agree], dtype=np.int64)
    return SharedTexts(rows_a, rows_b, label_a[rows_a].astype(np.int64), len(data_a), len(data_b),
                       len(common) - len(agree))


def _first_rows(keys: pd.Series, *, hashed: bool) -> dict[str, int]:
    """Text hash (or id) → the position of its first row."""
    rows: dict[str, int] = {}
    for i, key in enumerate(keys):
        rows.setdefault(text_sha256(str(key)) if hashed else str(key), i)
    return rows


def compare_runs(first: str, data_a: pd.DataFrame, scores_a: pd.DataFrame, second: str, data_b: pd.DataFrame,
                 scores_b: pd.DataFrame, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95,
                 min_per_class: int = MIN_PER_CLASS, by: str = "text") -> RunPair:
    """Each method both runs scored (columns of `scores_a` and `scores_b`, rows aligned with `data_a`/`data_b`),
    compared on the shared texts (matched `by` text or id): ΔAUROC = second − first, DeLong's test and a seeded
    paired bootstrap. A method with a non-finite score on a shared text: ValueError naming it."""
    shared = shared_texts(data_a, data_b, by=by)
    if min(shared.n_members, shared.n_nonmembers) < min_per_class:
        return RunPair(first, second, shared, f"a paired test needs ≥ {min_per_class} shared members and ≥ "
                                              f"{min_per_class} shared non-members")
    pairs = []
    for method in (m for m in scores_a.columns if m in scores_b.columns):
        a = scores_a[method].to_numpy(dtype=np.float64)[shared.rows_a]
        b = scores_b[method].to_numpy(dtype=np.float64)[shared.rows_b]
        try:
            pairs.append(MethodPair(method, delong(shared.labels, a, b, ci=ci),
                                    paired_bootstrap(shared.labels, a, b, n_boot=n_boot, seed=seed, ci=ci)))
        except ValueError as err:
            raise ValueError(f"{method}: {err}") from None
    return RunPair(first, second, shared, None, pairs)


def p_words(p: float) -> str:
    """"p = 0.0004", "p = 0.31", "p = 1", or "p < 0.0001": two significant digits down to 10⁻⁴, below that a
    bound."""
    if np.isnan(p):
        return "p undefined (zero standard error)"
    return "p < 0.0001" if p < 0.0001 else f"p = {p:.2g}"


def shared_sentence(pair: RunPair) -> str:
    """What the two runs share, in words: all texts, some (compared on those only), or too few (and why not)."""
    s, names = pair.shared, f"{pair.first} and {pair.second}"
    n = len(s.rows_a)
    counted = f"{n:,} texts ({s.n_members:,} members, {s.n_nonmembers:,} non-members)"
    conflict = (f"; {s.conflicting:,} more texts are labelled differently in the two runs and left out"
                if s.conflicting else "")
    if n == 0:
        return f"{names} scored no text in common{conflict}: no paired test."
    if pair.refused:
        return f"{names} share {counted}{conflict}: too few for a paired test ({pair.refused})."
    if n == s.n_a == s.n_b:
        return f"{names} scored the same {counted}{conflict}: compared text by text."
    return (f"{names} share {counted} of their {s.n_a:,} and {s.n_b:,}{conflict}: compared on the shared texts "
            "only.")


def delta_sentence(pair: RunPair, result: MethodPair, label: str) -> str:
    """"Loss: ΔAUROC (#2 − #1) = 0.123 [0.080, 0.166], DeLong p = 0.0004, on 480 shared texts; paired bootstrap
    95% CI [0.079, 0.170] (1,000 resamples, seed 0)": one method's paired result, as a researcher would cite it."""
    t, b = result.test, result.bootstrap
    lo, hi = t.ci
    boot = ("no paired bootstrap interval (every resample had one class)" if b.n_used == 0 else
            f"paired bootstrap 95% CI [{b.ci[0]:.3f}, {b.ci[1]:.3f}] ({b.n_boot:,} resamples, seed {b.seed}"
            + (f", {b.skipped:,} with one class skipped)" if b.skipped else ")"))
    return (f"{label}: ΔAUROC ({pair.second} − {pair.first}) = {t.delta:.3f} [{lo:.3f}, {hi:.3f}], DeLong "
            f"{p_words(t.p)}, on {t.n_members + t.n_nonmembers:,} shared texts; {boot}.")

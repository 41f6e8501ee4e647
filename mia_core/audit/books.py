"""Per-book contamination: rate, prevalence with intervals, a book-level test and BH-adjusted p-values.

Verdicts are plain words that rest on the calibration's FPR and never claim certainty: a detector
finds evidence *consistent with* training on a book; or the book's hit rate sits well above the
calibration's but its test does not reach significance with these counts (inconclusive: more snippets
or calibration would decide, and the verdict says about how many); or the rate is consistent with the
calibration's FPR (no evidence found, which does not show absence).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import special, stats

from ..metrics import benjamini_hochberg
from .calibration import Calibration
from .statistics import (book_test, clopper_pearson_many, prevalence, prevalence_intervals,
                         serial_design_effects)

#: Significance level of the BH-adjusted book test used by the verdicts.
ALPHA = 0.05
VERDICTS = {
    "evidence": "evidence consistent with training on this book",
    "weak": "scores above unseen books, but the prevalence interval includes 0: weak evidence",
    "inconclusive": "inconclusive: the rate and prevalence are above the calibration's false-positive rate, but the "
                    "book test does not reach significance with these counts (more snippets or calibration needed)",
    "none": "no evidence of training found: the rate is consistent with the calibration's false-positive rate (this "
            "does not show the book was unseen)",
    "uninformative": "no verdict: the method does not separate the calibration books",
    "weak_calibration": "calibration too weak for a verdict: its false-positive rate is not pinned down (more "
                        "non-member calibration books would)",
    "too_few": "too few snippets for a verdict: with this book's and the calibration's snippets the book test cannot "
               "reach significance after the correction for the number of books",
}
#: The verdicts in a few words, for table cells, legends and chart traces (VERDICTS says them in full).
VERDICT_SHORT = {"evidence": "consistent with training", "weak": "undecided (weak)", "inconclusive": "inconclusive",
                 "none": "no evidence found",
                 "uninformative": "no verdict", "weak_calibration": "calibration too weak",
                 "too_few": "too few snippets"}
#: What each short verdict means, for legends that name the short one first (no "no verdict: no verdict: …").
VERDICT_MEANING = {k: v.removeprefix(f"{VERDICT_SHORT[k]}: ") for k, v in VERDICTS.items()}
BOOK_COLUMNS = ["book", "n_snippets", "n_effective", "rate", "rate_lo", "rate_hi", "prevalence", "prevalence_lo",
                "prevalence_hi", "mean_score", "p_value", "p_adj", "verdict", "verdict_fpr"]


def analyse_books(calibration: Calibration, snippets: pd.DataFrame, *, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per book of `snippets` (columns book, position, score), sorted by prevalence, highest first.

    n_effective = snippets / serial design effect of the hits along the book (of the scores when every
    snippet is a hit or none is: an upper bound); rate = share of the book's snippets with score ≥
    threshold, with a Clopper–Pearson interval on the effective count; prevalence = Rogan–Gladen
    correction of the rate with the calibration's TPR/FPR, its interval the prevalences an exact
    binomial test of the effective hit count does not reject, averaged over the calibration's paired
    draws of a new book's TPR/FPR (`statistics.prevalence_intervals`); p_value = one-sided Mann–Whitney U
    against the non-member calibration snippets; p_adj = Benjamini–Hochberg across the books of the run.
    Every book is computed at once (a catalogue: 10^4 books), books of one length as one array.
    """
    cal = calibration
    codes, names = pd.factorize(snippets["book"], sort=True)  # no Python string per snippet (10^6 of them)
    names = np.asarray(names, dtype=object)
    order = np.lexsort((snippets["position"].to_numpy(), codes))
    scores = snippets["score"].to_numpy(dtype=np.float64)[order]
    sizes = np.bincount(codes, minlength=len(names))
    starts = np.cumsum(sizes) - sizes
    rate, deff, mean_score = (np.full(len(names), np.nan) for _ in range(3))
    for size in np.unique(sizes):  # books of one length: one (books, size) array
        books = np.flatnonzero(sizes == size)
        block = scores[starts[books][:, None] + np.arange(size)]
        hits = (block >= cal.threshold).astype(np.float64)
        by_hits = serial_design_effects(hits)
        flat = ~np.isfinite(by_hits)  # every snippet a hit or none: the scores' design effect bounds it
        by_hits[flat] = serial_design_effects(block[flat])
        rate[books], deff[books], mean_score[books] = hits.mean(axis=1), by_hits, block.mean(axis=1)
    n_eff = np.where(np.isfinite(deff), sizes / deff, sizes.astype(np.float64))
    rate_lo, rate_hi = clopper_pearson_many(rate * n_eff, n_eff, cal.ci)
    if cal.tpr > cal.fpr:
        prevalence_lo, prevalence_hi = prevalence_intervals(rate * n_eff, n_eff, cal.pred_tpr, cal.pred_fpr, cal.ci)
    else:  # the calibration does not separate members: no prevalence
        prevalence_lo = prevalence_hi = np.full(len(names), np.nan)
    table = pd.DataFrame({
        "book": names, "n_snippets": sizes.astype(int), "n_effective": n_eff, "rate": rate, "rate_lo": rate_lo,
        "rate_hi": rate_hi, "prevalence": prevalence(rate, cal.tpr, cal.fpr), "prevalence_lo": prevalence_lo,
        "prevalence_hi": prevalence_hi, "mean_score": mean_score,
        "p_value": book_tests(scores, starts, cal.nonmember_scores)})
    table["p_adj"] = benjamini_hochberg(table["p_value"].to_numpy())
    table["verdict"] = [verdict(row, cal, alpha, n_books=len(table)) for row in table.itertuples()]
    table["verdict_fpr"] = cal.fpr
    return table.sort_values(["prevalence", "mean_score"], ascending=False, na_position="last").reset_index(drop=True)[BOOK_COLUMNS]


def book_tests(scores: np.ndarray, starts: np.ndarray, reference) -> np.ndarray:
    """`statistics.book_test` of every book at once: book k is `scores[starts[k]:starts[k + 1]]` (none empty).

    U = Σ over the book's snippets of (reference scores below + ½ · equal), from one sorted copy of
    the reference; the tie correction counts ties in book ∪ reference; the p-value is scipy's
    normal approximation, written out the same way (continuity-corrected, same operations, so the same
    numbers). Books or references of ≤ 8 snippets go to scipy itself (it may use the exact U law there).
    """
    ref = np.sort(np.asarray(reference, dtype=np.float64))
    n1 = np.diff(np.append(starts, scores.size)).astype(np.int64)
    n2 = ref.size
    out = np.full(n1.size, np.nan)
    small = (n1 <= 8) | (n2 <= 8)
    for k in np.flatnonzero(small):
        out[k] = book_test(scores[starts[k]:starts[k] + n1[k]], ref)
    big = np.flatnonzero(~small)
    if big.size == 0 or n2 == 0:
        return out
    book = np.repeat(np.arange(n1.size), n1)
    below, upto = np.searchsorted(ref, scores, "left"), np.searchsorted(ref, scores, "right")
    u = np.add.reduceat(below + 0.5 * (upto - below), starts)  # half-integers: exact in any order
    values, counts = np.unique(ref, return_counts=True)
    ties = np.full(n1.size, float((counts.astype(np.float64) ** 3 - counts).sum()))
    by_value = np.lexsort((scores, book))  # runs of one value within one book
    value, owner, in_ref = scores[by_value], book[by_value], (upto - below)[by_value]
    first = np.flatnonzero(np.concatenate([[True], (value[1:] != value[:-1]) | (owner[1:] != owner[:-1])]))
    in_book = np.diff(np.append(first, value.size)).astype(np.float64)
    group, in_ref = in_book + in_ref[first], in_ref[first].astype(np.float64)
    ties += np.bincount(owner[first], weights=(group ** 3 - group) - (in_ref ** 3 - in_ref), minlength=n1.size)
    n1, u, ties = n1[big], u[big], ties[big]
    n = n1 + n2
    s = np.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (u - n1 * n2 / 2 - 0.5) / s
    out[big] = np.clip(special.ndtr(-z), 0.0, 1.0)
    return out


def can_reach(n_snippets: int, n_reference: int, n_books: int, alpha: float = ALPHA) -> bool:
    """Whether the book test could be significant after the correction for `n_books` books: its smallest p-value
    (every snippet above every reference one: exactly 1 / C(n + m, n)) times the books below `alpha`. 2 + 2
    calibration books of 3 snippets and 8 books of 3: 8 / C(9, 3) = 0.095, no; the demo's 5 and 10: 0.0027, yes."""
    log_comb = math.lgamma(n_snippets + n_reference + 1) - math.lgamma(n_snippets + 1) - math.lgamma(n_reference + 1)
    return math.log(n_books) - log_comb < math.log(alpha)


def verdict_key(p_adj: float, prevalence_lo: float, cal: Calibration, alpha: float = ALPHA, *,
                reachable: bool = True) -> str:
    """Which of `VERDICTS` applies: the test decides, the prevalence interval grades it, once a verdict can rest on
    the calibration (it separates the books, its FPR is pinned down: `Calibration.supports_verdicts`) and the test
    could be significant with these counts (`reachable`, see `can_reach`)."""
    if not cal.informative:
        return "uninformative"
    if not cal.supports_verdicts:
        return "weak_calibration"
    if not reachable:
        return "too_few"
    if np.isfinite(p_adj) and p_adj < alpha:
        return "evidence" if prevalence_lo > 0 else "weak"
    return "inconclusive" if prevalence_lo > 0 else "none"


def snippets_needed(p_value: float, n_snippets: int, n_reference: int, n_books: int,
                    alpha: float = ALPHA) -> tuple[int | None, int | None]:
    """About how many snippets of the book (the reference kept) or known non-member snippets (the book kept) the
    book test would need to reach `alpha` / `n_books` (Bonferroni: enough for BH too) at the same separation.

    Mann–Whitney's z grows as √(n₁n₂ / (n₁ + n₂ + 1)) for a fixed AUROC, so the z of `p_value` is scaled to the
    z needed; None where no count of that kind would do (the other count is the limit) or the scores do not sit
    above the reference's at all (p ≥ 0.5). An estimate for planning, not a guarantee: the scores of new snippets vary.
    """
    z_now, z_goal = stats.norm.isf(p_value), stats.norm.isf(alpha / n_books)
    if not np.isfinite(z_now) or z_now <= 0:
        return None, None
    # n₁n₂ / (n₁ + n₂ + 1) must grow by (z_goal / z_now)² from its value now: solve it for n₁, then for n₂
    goal = n_snippets * n_reference / (n_snippets + n_reference + 1) * (z_goal / z_now) ** 2

    def solve(other: int) -> int | None:
        return math.ceil(goal * (other + 1) / (other - goal)) if other > goal else None
    return solve(n_reference), solve(n_snippets)


def book_key(row, cal: Calibration, n_books: int, alpha: float = ALPHA) -> str:
    """`verdict_key` of one row of an `analyse_books` table of `n_books` books."""
    return verdict_key(row.p_adj, row.prevalence_lo, cal, alpha,
                       reachable=can_reach(row.n_snippets, cal.n_nonmember_snippets, n_books, alpha))


def verdict(row, cal: Calibration, alpha: float = ALPHA, *, n_books: int = 1) -> str:
    """The verdict in words, with the calibration FPR it rests on (and, when inconclusive, what would decide)."""
    key = book_key(row, cal, n_books, alpha)
    more = needed_words(row, cal, n_books, alpha) if key == "inconclusive" else ""
    return f"{VERDICTS[key]}{more} (threshold at {cal.fpr:.1%} FPR on the calibration books)"


def needed_words(row, cal: Calibration, n_books: int, alpha: float = ALPHA) -> str:
    """What would let an inconclusive book's test decide, in words (`snippets_needed`), starting with '; '."""
    book, reference = snippets_needed(row.p_value, row.n_snippets, cal.n_nonmember_snippets, n_books, alpha)
    options = ([f"about {book:,} snippets of this book (it has {row.n_snippets:,}; shorter snippets give more)"]
               if book is not None else [])
    options += ([f"about {reference:,} known non-member calibration snippets (there are {cal.n_nonmember_snippets:,})"]
                if reference is not None else [])
    if not options:
        return ""
    return f"; at these scores {' or '.join(options)} would let the test decide"


def verdict_keys(books: pd.DataFrame, cal: Calibration, alpha: float = ALPHA) -> list[str]:
    """`verdict_key` of every row of an `analyse_books` table, in its order."""
    return [book_key(row, cal, len(books), alpha) for row in books.itertuples()]


def equal_rate_notes(books: pd.DataFrame, keys: list[str], quote=str) -> list[str]:
    """Sentences for books that share a flagged rate but not a verdict, saying why (`quote` escapes book names).

    The verdict rests on the book test of every snippet score and on the prevalence interval, whose width
    follows the effective snippet count, so equal rates can get different verdicts.
    """
    table = books.assign(key=keys, rounded=books["rate"].round(9))
    notes = []
    for rate, group in table.groupby("rounded", sort=False):
        if group["key"].nunique() < 2:
            continue
        shown = group.drop_duplicates("key")  # one book per verdict, in table order
        more = group["key"].value_counts() - 1
        parts = "; ".join(f"{quote(r.book)}: {VERDICT_SHORT[r.key]} (adjusted p {r.p_adj:.2g}, "
                          f"{r.n_effective:.1f} effective of {r.n_snippets} snippets)"
                          + (f" and {more[r.key]} more like it" if more[r.key] else "") for r in shown.itertuples())
        notes.append(f"Equal rates, different verdicts: at {rate:.0%} of snippets flagged, {parts}. The rate alone does "
                     "not decide: the verdict rests on the book test of all snippet scores, not only of those over "
                     "the threshold, and on the prevalence interval, which is wider for fewer effective snippets.")
    return notes

"""N-gram coverage's matching: words by NLTK's `casual_tokenize` on `unidecode(text)`, the authors' span search, and
a continuation's coverage (METHODS-FIELD.md §14; `shallinan1/membership-inference` 9269621,
`compute_ngram_coverage.py find_exact_match`, `compute_creativity_index.py get_ngram_coverage`).

Kept apart from the declaration so that reading the registry loads no NLTK (its import takes seconds).
"""
from __future__ import annotations

from nltk.tokenize.casual import casual_tokenize
from unidecode import unidecode

Span = tuple[int, int]  # [start, end) in the continuation's words


def words(text: str) -> list[str]:
    """The words matching compares: NLTK's regex casual tokenizer on the ASCII transliteration (no model needed)."""
    return casual_tokenize(unidecode(text))


def _codes(*sequences: list[str]) -> list[str]:
    """Each word sequence as a string of one character per word (equal words, equal characters), so that a run of
    words occurs contiguously in another sequence exactly when its string is a substring of the other's."""
    alphabet: dict[str, str] = {}
    return ["".join(alphabet.setdefault(w, chr(len(alphabet))) for w in seq) for seq in sequences]


def find_spans(gen: list[str], ref: list[str], ngram: int) -> list[Span]:
    """The authors' span search of the continuation's words `gen` in the suffix's words `ref`.

    With [a, b) = [0, L) while b ≤ |gen|: if gen[a:b] occurs contiguously in ref, record it (replacing the last span
    if it contains it) and grow b; else shrink from the left while longer than L, or slide by one.
    """
    g, r = _codes(gen, ref)
    spans: list[Span] = []
    a, b = 0, ngram
    while b <= len(g):
        if g[a:b] in r:
            if spans and a <= spans[-1][0] and spans[-1][1] <= b:
                spans[-1] = (a, b)
            else:
                spans.append((a, b))
            b += 1
        elif b - a > ngram:
            a += 1
        else:
            a, b = a + 1, b + 1
    return spans


def coverage(gen: list[str], spans: list[Span], *, min_run: int, ref_length: int, unique: bool,
             normalization: str) -> float:
    """The share of the continuation's words inside recorded spans of ≥ `min_run` words (`unique`: a span whose words
    were seen earlier in the same continuation is skipped), divided as `normalization` says."""
    flags, seen = [False] * len(gen), set()
    for a, b in spans:
        key = tuple(gen[a:b])
        if b - a >= min_run and not (unique and key in seen):
            flags[a:b] = [True] * (b - a)
        seen.add(key)  # seen even when too short to count, as the authors' loop
    covered = sum(flags)
    if covered == 0:
        return 0.0
    longer = max(len(gen), ref_length)
    if normalization == "gen_length":
        return covered / len(gen)
    if normalization == "ref_length":
        return covered / longer
    return 2 * covered / (len(gen) + longer)


def reproduced(ref: list[str], runs: list[list[str]]) -> list[bool]:
    """A mask over the suffix's words: those inside any occurrence of any of the runs."""
    mask = [False] * len(ref)
    for run in runs:
        r, g = _codes(ref, run)
        at = r.find(g)
        while at >= 0 and g:
            mask[at:at + len(g)] = [True] * len(g)
            at = r.find(g, at + 1)
    return mask

"""N-gram coverage's matching: words by NLTK's `casual_tokenize` on `unidecode(text)`, the authors' span search, and
a continuation's coverage (METHODS-FIELD.md §14; `shallinan1/membership-inference` 9269621,
`compute_ngram_coverage.py find_exact_match`, `compute_creativity_index.py get_ngram_coverage`).

Kept apart from the declaration so that reading the registry loads no NLTK (its import takes seconds); sacremoses
(seconds too) loads only for `mode="reference"`.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from nltk.tokenize.casual import casual_tokenize
from unidecode import unidecode

from ...deferred import deferred

if TYPE_CHECKING:
    import sacremoses
else:
    sacremoses = deferred("sacremoses")

Span = tuple[int, int]  # [start, end) in the continuation's words
Occurs = Callable[[int, int], bool]  # does the continuation's run [a, b) occur in the suffix?


def words(text: str) -> list[str]:
    """The words matching compares: NLTK's regex casual tokenizer on the ASCII transliteration (no model needed)."""
    return casual_tokenize(unidecode(text))


def _codes(*sequences: list[str]) -> list[str]:
    """Each word sequence as a string of one character per word (equal words, equal characters), so that a run of
    words occurs contiguously in another sequence exactly when its string is a substring of the other's."""
    alphabet: dict[str, str] = {}
    return ["".join(alphabet.setdefault(w, chr(len(alphabet))) for w in seq) for seq in sequences]


@lru_cache(maxsize=1)
def _detokenizer():
    """The authors' detokenizer: sacremoses' English Moses detokenizer."""
    return sacremoses.MosesDetokenizer(lang="en")


def detokenize(words_: list[str]) -> str:
    """A run of words as the authors' code writes it before its substring test (Moses detokenization)."""
    return _detokenizer().detokenize(words_)


def word_occurs(gen: list[str], ref: list[str]) -> Occurs:
    """Ours: gen[a:b] occurs as a contiguous sequence of words in ref."""
    g, r = _codes(gen, ref)
    return lambda a, b: g[a:b] in r


def substring_occurs(gen: list[str], suffix: str) -> Occurs:
    """The authors' (`mode="reference"`): gen[a:b], Moses-detokenized, is a character substring of the unidecoded
    suffix, so a run need not start or end on one of its words ("he lazy dog" occurs in "the lazy dog")."""
    text = unidecode(suffix)
    return lambda a, b: detokenize(gen[a:b]) in text


def find_spans(gen: list[str], ref: list[str], ngram: int, occurs: Occurs | None = None) -> list[Span]:
    """The authors' span search of the continuation's words `gen` in the suffix's words `ref` (or by `occurs`).

    With [a, b) = [0, L) while b ≤ |gen|: if gen[a:b] occurs in the suffix, record it (replacing the last span if it
    contains it) and grow b; else shrink from the left while longer than L, or slide by one.
    """
    occurs = occurs or word_occurs(gen, ref)
    spans: list[Span] = []
    a, b = 0, ngram
    while b <= len(gen):
        if occurs(a, b):
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
             normalization: str, key: Callable[[list[str]], object] = tuple) -> float:
    """The share of the continuation's words inside recorded spans of ≥ `min_run` words (`unique`: a span whose `key`
    — its words, or the authors' detokenized text — was seen earlier in the same continuation is skipped), divided as
    `normalization` says."""
    flags, seen = [False] * len(gen), set()
    for a, b in spans:
        name = key(gen[a:b])
        if b - a >= min_run and not (unique and name in seen):
            flags[a:b] = [True] * (b - a)
        seen.add(name)  # seen even when too short to count, as the authors' loop
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

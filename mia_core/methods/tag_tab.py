"""Tag&Tab (Antebi et al., arXiv 2501.08454; authors' code `sagivantebi/Tag-Tab` at 689cd72, `src/helpers.py`,
`src/attacks.py`): the mean log-prob of the tokens of the rarest words of each sentence.

Tagging: the text is cut into sentences; in each sentence of `min_words`–`max_words` whitespace words, words are
normalised (lowercase, ASCII punctuation removed, as the Sep-2025 helpers) and ranked by
`e(w) = −p·log2 p` with `p = wordfreq.word_frequency(w, language)` (`e = 0` when `p = 0`). Every word has
`p < 1/e`, where `e(p)` rises with `p`, so the lowest e are the rarest words. The `n_keywords` lowest-e distinct words
of each sentence are its keywords (ties: first appearance). Tabbing: score = mean ℓ_t over every scored token that
overlaps a keyword's occurrence in its own sentence, pooled over sentences (each token once); `first_token_only`
(the "FT" variant) keeps each keyword's first scored token. Higher = member, no sign change.

`n_keywords` is the reference's column `tag_tab_AT_k=K`: the keywords of rank `i < K`, 0-based, i.e. K words.
The reference's `--top_k_entropy T` (default 10) only caps the columns at `K ≤ T − 1` (it keeps T − 1 words
after the NER union). The README's default "K=4" is read as 4 keywords: **unconfirmed** against the paper.
The parameter is `n_keywords`, not `k`: `score_texts` and the CLI hand every method's `k` the min-k% fraction.

Deviations from the authors' code:
- no NER union (no spaCy); it changes the keywords only where spaCy's entity pieces normalise differently from
  the whitespace words, e.g. "Obama's" vs "Obama";
- a small regex splitter (`split_sentences`) instead of spaCy's sentences: it also cuts after abbreviations
  followed by a capital ("Mr. Smith");
- a keyword maps to its own occurrence in its sentence through the token offsets (its first one there when it
  recurs in the sentence). The reference `str.find`s it in the joined tokens: first occurrence in the whole text,
  substrings allowed, `Ġ` not stripped, and one position off for tokenizers without a BOS;
- ties in e break by first appearance, not by set order, and a token under two keywords counts once;
- no eligible sentence: the whole (scored) text is one sentence, flagged (the reference emits nothing);
- under `long_text="truncate"` only the scored prefix is tagged; the reference's AUROC-based sign flip is not copied.
Unconfirmed (paper not read): the Dec-2024 code counted word frequencies over the evaluated corpus itself;
we use the Sep-2025 code's wordfreq tables.
"""
from __future__ import annotations

import math
import re
import string
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..api import (
    LOGP, LOGP_RANGE, AccessNeeds, Paper, Score, TokenStats, TokenView, is_int, param, register, require_tokens,
)
from ..deferred import deferred

if TYPE_CHECKING:  # wordfreq's tables load when a text is scored, not with the registry
    import wordfreq
else:
    wordfreq = deferred("wordfreq")

#: Removes ASCII punctuation anywhere in a word (the authors' `_normalize_token`).
_STRIP = str.maketrans("", "", string.punctuation)
#: Sentence-final punctuation, closing quotes or brackets, then the whitespace where a sentence may end.
_TERMINAL = re.compile(r"[.!?]+[\"'”’»)\]]*(\s+)")
#: Characters that may open a sentence besides a capital letter or a digit.
_OPENERS = "\"'“‘«(["


@dataclass(frozen=True)
class TagTabParams:
    """Parameters of Tag&Tab (the README's defaults)."""

    n_keywords: int = param(4, "keywords per sentence: its lowest-e (rarest) distinct words (the reference's AT_k "
                            "column, README: K=4)", low=1, high=20, step=1)
    min_words: int = param(7, "fewest whitespace words of a sentence that is tagged (the authors' "
                           "`--min_len_line_generate`)", low=1, high=200, step=1)
    max_words: int = param(40, "most whitespace words of a sentence that is tagged (the authors' "
                           "`--max_len_line_generate`; ≥ min_words)", low=1, high=500, step=1)
    first_token_only: bool = param(False, 'the "FT" variant: only each keyword\'s first token (default: all its tokens, '
                                   '"AT")')
    language: str = param("en", "wordfreq language of the word frequencies (a code such as en, de, fr)", widget=False)

    def __post_init__(self) -> None:
        for name in ("n_keywords", "min_words", "max_words"):
            value = getattr(self, name)
            if not is_int(value) or value < 1:
                raise ValueError(f"{name} must be an integer ≥ 1 (got {value!r})")
        if self.max_words < self.min_words:
            raise ValueError(f"max_words must be ≥ min_words (got {self.max_words} < {self.min_words})")
        if not isinstance(self.first_token_only, (bool, np.bool_)):
            raise ValueError(f"first_token_only must be true or false (got {self.first_token_only!r})")
        if self.language not in _languages():
            raise ValueError(f"language must be one of wordfreq's {sorted(_languages())} (got {self.language!r})")


@lru_cache(maxsize=1)
def _languages() -> frozenset[str]:
    """The languages wordfreq has tables for (read once)."""
    return frozenset(wordfreq.available_languages())


@lru_cache(maxsize=1 << 17)
def frequency(word: str, language: str) -> float:
    """wordfreq's frequency of a normalised word, cached: a long text repeats most of its words."""
    return float(wordfreq.word_frequency(word, language))


def word_entropy(p: float) -> float:
    """e = −p·log2 p (0 for p = 0); increasing in p below 1/e, so the lowest e are the rarest words."""
    return -p * math.log2(p) if p > 0 else 0.0


def normalize(word: str) -> str:
    """Lowercased, ASCII punctuation removed (as the authors' helper); "" for a word of punctuation only."""
    return "".join(word.lower().translate(_STRIP).split())


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the sentences of `text`, whitespace trimmed.

    A sentence ends at `.`, `!` or `?` (closing quotes or brackets may follow) before whitespace and a capital
    letter, a digit or an opening quote/bracket, and at every line break.
    """
    cuts = {m.start() for m in re.finditer("\n", text)}
    for m in _TERMINAL.finditer(text):
        nxt = text[m.end()] if m.end() < len(text) else ""
        if nxt and (nxt.isupper() or nxt.isdigit() or nxt in _OPENERS):
            cuts.add(m.start(1))
    spans, start = [], 0
    for end in sorted(cuts) + [len(text)]:
        piece = text[start:end]
        left = len(piece) - len(piece.lstrip())
        right = len(piece.rstrip())
        if right > left:
            spans.append((start + left, start + right))
        start = end
    return spans


def _is_punct(char: str) -> bool:
    """ASCII or Unicode punctuation (quotes, dashes…), trimmed from a word's span."""
    return char in string.punctuation or unicodedata.category(char).startswith("P")


def _words(text: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """(normalised word, start, end) of each whitespace word of text[start:end], the span without outer punctuation."""
    out = []
    for m in re.finditer(r"\S+", text[start:end]):
        a, b = start + m.start(), start + m.end()
        word = normalize(m.group())
        if not word:
            continue
        while a < b - 1 and _is_punct(text[a]):
            a += 1
        while b > a + 1 and _is_punct(text[b - 1]):
            b -= 1
        out.append((word, a, b))
    return out


def keywords(text: str, start: int, end: int, n_keywords: int, language: str) -> list[tuple[str, int, int, float]]:
    """(word, start, end, p) of the `n_keywords` lowest-e distinct words of a sentence, rarest first.

    Ties keep the order of first appearance; a word that recurs keeps its first occurrence in the sentence.
    """
    first: dict[str, tuple[int, int]] = {}
    for word, a, b in _words(text, start, end):
        first.setdefault(word, (a, b))
    p = {word: frequency(word, language) for word in first}
    ranked = sorted(first, key=lambda w: word_entropy(p[w]))  # stable
    return [(w, *first[w], p[w]) for w in ranked[:n_keywords]]


def _eligible(text: str, params: TagTabParams) -> tuple[list[tuple[int, int]], bool]:
    """The sentences that are tagged, and whether none qualified (then the whole text is one sentence)."""
    spans = [(a, b) for a, b in split_sentences(text)
             if params.min_words <= len(text[a:b].split()) <= params.max_words]
    if spans:
        return spans, False
    stripped = text.strip()
    start = len(text) - len(text.lstrip())
    return ([(start, start + len(stripped))] if stripped else []), True


def _overlapping(offsets: np.ndarray):
    """A function (start, end) → indices of the tokens overlapping that character span; (0, 0) specials never do.

    Token spans normally rise through the text, so two binary searches find them; else a scan of all tokens.
    """
    real = np.flatnonzero(offsets[:, 1] > offsets[:, 0])  # (n_real,)
    starts, ends = offsets[real, 0], offsets[real, 1]
    if np.all(np.diff(starts) >= 0) and np.all(np.diff(ends) >= 0):
        return lambda a, b: real[np.searchsorted(ends, a, side="right"):np.searchsorted(starts, b, side="left")]
    return lambda a, b: real[(starts < b) & (ends > a)]


@register("tag_tab", access=AccessNeeds(),
          lesson=250, paper=Paper("Antebi et al.", 2025, "https://arxiv.org/abs/2501.08454",
                                  "Tag&Tab: Pretraining Data Detection in Large Language Models Using Keyword-Based "
                                  "Membership Inference Attack", "arXiv:2501.08454"),
          fails=("It needs sentences of 7–40 words to tag (a text without one is scored as one sentence, flagged), "
                 "and its rare words come from general word-frequency tables, not the training corpus; the authors' "
                 "evaluation flips scores whenever AUROC < 0.5, a label-dependent step (METHODS-FIELD.md §9)."),
          view=TokenView(LOGP,
                         "the tokens of each sentence's rarest words, its keywords (listed below); the score is their "
                         "mean log p",
                         token_range=LOGP_RANGE),
          label="Tag&Tab", params=TagTabParams,
          reading=lambda v: f"the tokens of each sentence's rarest words average a log-probability of {v:.2f}: a model "
                            "that saw the text predicts its rare words better.",
          formula=r"\mathrm{score}(x) = \frac{1}{|T|}\sum_{t\in T} \log p(x_t \mid x_{<t}),\ T = \text{tokens of the }"
                  r" K \text{ lowest-}e \text{ words of each sentence},\ e(w) = -p(w)\log_2 p(w)",
          idea="Rare words (names, numbers, terms) are hard to guess unless the text was seen: average the "
               "log-probs of only each sentence's rarest words.",
          summary="Mean log-prob of the tokens of each sentence's K rarest words (wordfreq frequencies): memorised "
                  "text makes its rare words predictable.")
def tag_tab(stats: TokenStats, params: TagTabParams) -> Score:
    """Mean logprob over the tokens of every eligible sentence's `n_keywords` rarest words (FT: first tokens)."""
    require_tokens(stats)
    text = stats.scored_text
    sentences, fallback = _eligible(text, params)
    tokens_in = _overlapping(stats.offsets)
    selected = np.zeros(stats.n_scored, dtype=bool)
    table = []
    for number, (a, b) in enumerate(sentences, start=1):
        for rank, (word, ws, we, p) in enumerate(keywords(text, a, b, params.n_keywords, params.language)):
            hit = tokens_in(ws, we)
            if params.first_token_only:
                hit = hit[:1]
            selected[hit] = True
            table.append({"sentence": number, "rank": rank, "keyword": word, "word": text[ws:we],
                          "frequency": p, "e": word_entropy(p), "tokens": int(hit.size)})
    if not selected.any():
        preview = stats.text[:40] + ("…" if len(stats.text) > 40 else "")
        why = ("the text has no word" if not table else
               "no keyword overlaps a scored token (the tokenizer gave no character offsets, or the keywords lie "
               "outside the scored tokens)")
        raise ValueError(f"tag_tab: no keyword token to score in text {preview!r}: {why}")
    token_scores = stats.logprob.astype(np.float64)
    details = {"no_eligible_sentence": fallback, "sentences": len(sentences), "keywords": table}
    return Score(float(np.mean(token_scores[selected])), token_scores, selected, details)

"""SimMIA's words (METHODS-API.md §20, step 1): a text cut into nltk's words, re-aligned so that the words, each
carrying the whitespace before it, join back to the text exactly; and a sample's first word.

Source: the authors' `utils/misc.py` (`word_tokenize`, `extract_first_word`; `niusj03/Enhanced-black-box-MIA@03ea33c`,
an import of the official `simmia2026/SimMIA`). Deviations, both because nltk's `punkt_tab` sentence model is not
offline data (nltk's downloader fetches it; no PyPI package we trust ships it):

- Words come from nltk's `NLTKWordTokenizer` on the whole text, without punkt's sentence split (what
  `nltk.word_tokenize(text, preserve_line=True)` does). The output can differ from theirs: the tokenizer splits only
  the text's *last* period off its word, so "It ended. Then" gives the word "ended." where punkt's split gives "ended"
  and "." (one position fewer here). Sample words go through the same tokenizer, so labels and samples stay comparable.
- Whitespace after the last word is kept on the last word (theirs makes it a word of its own, a position whose label
  is whitespace).
"""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ..deferred import deferred

if TYPE_CHECKING:  # nltk takes about 2 s to import: it loads when a text is cut, not with the method registry
    import nltk.tokenize.destructive as destructive
else:
    destructive = deferred("nltk.tokenize.destructive")

#: How the Treebank rules may write a double quote of the text: `"` becomes `` or '', and '' after a space becomes ``.
QUOTES = ("``", "''")
_QUOTE_SPELLINGS = ('"', "''", "``")
#: What the authors replace in a sample before taking its first word: byte-level BPE's and SentencePiece's space marks.
SPACE_MARKS = ("Ġ", "▁")


@cache
def _tokenizer():
    """nltk's improved Treebank word tokenizer (stateless; one instance serves every call)."""
    return destructive.NLTKWordTokenizer()


def nltk_words(text: str) -> list[str]:
    """nltk's words of `text`, without sentence splitting (see the module's deviations)."""
    return _tokenizer().tokenize(text)


def _find(text: str, token: str, start: int) -> tuple[int, int] | None:
    """(start, end) of the nearest spelling of `token` in `text` from `start` on (a quote token: any spelling of a
    double quote; ties: the longest), or None where the text has none."""
    spellings = (token, *_QUOTE_SPELLINGS) if token in QUOTES else (token,)
    found = [(at, -len(s)) for s in spellings if (at := text.find(s, start)) >= 0]
    if not found:
        return None
    at, minus_length = min(found)
    return at, at - minus_length


def word_tokenize(text: str) -> list[str]:
    """The text's words, each with the whitespace (and any character nltk dropped) before it; they join to `text`.

    >>> word_tokenize('He said  "hi".\\n')
    ['He', ' said', '  "', 'hi', '"', '.\\n']
    """
    words: list[str] = []
    done = 0
    for token in nltk_words(text):
        span = _find(text, token, done)
        if span is None:  # a token not found as written: its characters join the next word
            continue
        words.append(text[done:span[1]])
        done = span[1]
    if done < len(text):
        if words:
            words[-1] += text[done:]
        else:
            words.append(text[done:])
    assert "".join(words) == text, f"the words {words!r} do not join to the text {text!r}"
    return words


def word_spans(words: list[str]) -> list[tuple[int, int]]:
    """Each word's (start, end) character span in the text the words join to."""
    spans, at = [], 0
    for word in words:
        spans.append((at, at + len(word)))
        at += len(word)
    return spans


def extract_first_word(token: str) -> str:
    """A word or sample as a label: space marks made spaces, stripped, its first nltk word (the string itself when
    nltk finds none, as theirs: an empty or blank sample stays as it is).

    >>> extract_first_word("Ġcastle walls"), extract_first_word(' "Yes," she'), extract_first_word("  ")
    ('castle', '``', '  ')
    """
    cleaned = token
    for mark in SPACE_MARKS:
        cleaned = cleaned.replace(mark, " ")
    words = nltk_words(cleaned.strip())
    return words[0] if words else token

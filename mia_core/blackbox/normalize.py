"""Text normalisation before near-verbatim matching, so typography does not split a match (METHODS-API.md §17 step 1).

Ahmed, Cooper, Koyejo & Liang, arXiv 2601.02671, App. C.3: NFKC; curly and other quotes to ASCII; dash variants
to an em dash; `…` to `...`; spaced dots collapsed, one space after `...` before a letter or digit; single-underscore
italics stripped; lower-case. Nothing else: no stemming, no stopword or other punctuation removal.

The paper gives its character tables only by example ("e.g."), so the exact tables are **unconfirmed**; the tables
below are **ours**. They list only characters that NFKC leaves as they are (NFKC already maps the fullwidth `＂`,
`＇`, the small em dash `﹘` and the vertical dash forms, and `…` itself). Left alone on purpose: the ASCII
hyphen-minus, the hyphens U+2010/U+2011 and the minus sign U+2212 (hyphens join words, they are not dashes), primes
(NFKC turns `″` into two primes, which are not quotes), and the acute and grave accents. Spaced dots (**ours**, the
paper names only `. . .`): a run of three or more dots separated by spaces or tabs loses its spaces, so `. . . .`
becomes `....`. Bump `NORMALIZATION_VERSION` whenever a table or rule changes: run manifests record it.
"""
from __future__ import annotations

import re
import unicodedata

NORMALIZATION_VERSION = "1"

#: Characters mapped to the ASCII double quote `"`.
DOUBLE_QUOTES = "\u201c\u201d\u201e\u201f\u00ab\u00bb\u301d\u301e\u301f"  # “ ” „ ‟ « » 〝 〞 〟
#: Characters mapped to the ASCII apostrophe `'`.
SINGLE_QUOTES = "\u2018\u2019\u201a\u201b\u2039\u203a\u02bc"  # ‘ ’ ‚ ‛ ‹ › ʼ
#: Characters mapped to the em dash U+2014 (each to one em dash).
DASHES = "\u2012\u2013\u2015\u2e3a\u2e3b"  # figure dash, en dash, horizontal bar, two-em and three-em dashes
EM_DASH = "\u2014"

_TABLE = str.maketrans({**dict.fromkeys(DOUBLE_QUOTES, '"'), **dict.fromkeys(SINGLE_QUOTES, "'"),
                        **dict.fromkeys(DASHES, EM_DASH), "\u2026": "..."})
_SPACED_DOTS = re.compile(r"\.(?:[ \t]+\.){2,}")
_ELLIPSIS_BEFORE_WORD = re.compile(r"\.\.\.(?=[^\W_])")
_UNDERSCORE_ITALICS = re.compile(r"_([^_]+)_")


def normalize(text: str) -> str:
    """The text as §17 step 1 compares it: NFKC, quote/dash/ellipsis tables, spaced dots, `_italics_`, lower-case.

    Examples
    --------
    >>> normalize("\u201cWait . . .what?\u201d \u2013 _she_ said")
    '"wait ... what?" \u2014 she said'
    """
    text = unicodedata.normalize("NFKC", text).translate(_TABLE)
    text = _SPACED_DOTS.sub(lambda match: "." * match.group().count("."), text)
    text = _ELLIPSIS_BEFORE_WORD.sub("... ", text)
    return _UNDERSCORE_ITALICS.sub(r"\1", text).lower()


def words(text: str) -> list[str]:
    """The normalised text split on whitespace: the words nv_recall matches (METHODS-API.md conventions, "Words")."""
    return normalize(text).split()

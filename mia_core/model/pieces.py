"""Tokenising one long text in overlapping pieces: the ids and offsets of tokenising it whole, in bounded memory.

A fast tokenizer's encoding holds ~300 bytes per token until it is converted (a 5 MB text: 0.85 GB), and Python
lists of ids and offset tuples ~140 more; a 50 MB text tokenised whole passed 8 GB. Here the text is tokenised a
piece of `PIECE_CHARS` characters at a time into NumPy arrays, so only one piece's encoding exists at once.

Stitching rule. Consecutive pieces overlap by `OVERLAP_CHARS`. A tokenisation can differ from the whole text's
only near a cut: the piece before differs near its end, the piece after near its start. The pieces are joined at
the first token of the later piece (past its first `EDGE_TOKENS`) from which both pieces give the same
`AGREE_TOKENS` tokens — same ids, same character spans — ending at least `EDGE_TOKENS` before the earlier
piece's end. Each tokenizer model runs on pre-tokenized words independently, and the pre-tokenizer's scan is the
same from any word start on; so once both pieces agree on a stretch of words far from both cuts, they agree
with the whole text there and from there on. Where no such stretch exists (one word longer than the overlap: a
text without whitespace), the earlier piece is tokenised again twice as long, and so on up to the whole rest of
the text — exact, just not bounded. Tests compare pieces against the whole on texts with hard cuts.

Only special tokens the tokenizer's post-processor adds (its template: a BOS first, an EOS last) differ from
tokenising the pieces alone: they are read once from a probe text and put around the stitched tokens.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tokenizers

#: Characters tokenised at once: a piece's encoding is transient (~0.1 GB at most), its arrays are kept.
PIECE_CHARS = 1 << 18
#: Characters two consecutive pieces share, where they are stitched (doubled until they agree).
OVERLAP_CHARS = 1 << 12
#: Tokens next to a cut that are never taken from that piece: a word cut in two tokenises otherwise.
EDGE_TOKENS = 16
#: Consecutive tokens two pieces must give identically (ids and spans) to be stitched there.
AGREE_TOKENS = 64
PROBE = "a"


class Tokens(NamedTuple):
    """Tokens of a span of the text: ids (n,) int64, special-token mask (n,) int8, character offsets (n, 2) int64."""

    ids: np.ndarray
    special: np.ndarray
    offsets: np.ndarray


def encode_long(backend: tokenizers.Tokenizer, text: str, *, piece_chars: int | None = None,
                overlap_chars: int | None = None) -> Tokens | None:
    """What `backend.encode(text, add_special_tokens=True)` gives (ids, special mask, offsets), as arrays, tokenised
    in pieces (default sizes: `PIECE_CHARS`, `OVERLAP_CHARS`); None when the post-processor's template cannot be
    read off a probe (then tokenise it whole)."""
    template = _template(backend)
    if template is None:
        return None
    return _stitched(backend, text, template, piece_chars or PIECE_CHARS, overlap_chars or OVERLAP_CHARS)


def _encode(backend: tokenizers.Tokenizer, text: str, start: int, end: int) -> Tokens:
    """Tokens of text[start:end] without the template's specials, with offsets into the whole text."""
    found = backend.encode(text[start:end], add_special_tokens=False)
    n = len(found.ids)
    ids = np.array(found.ids, dtype=np.int64)
    special = np.array(found.special_tokens_mask, dtype=np.int8)
    offsets = np.array(found.offsets, dtype=np.int64).reshape(n, 2) + start
    return Tokens(ids, special, offsets)


def _template(backend: tokenizers.Tokenizer) -> tuple[Tokens, Tokens] | None:
    """(prefix, suffix): the special tokens the post-processor puts before and after a single text's tokens."""
    bare = backend.encode(PROBE, add_special_tokens=False)
    full = backend.encode(PROBE, add_special_tokens=True)
    n, ids = len(bare.ids), full.ids
    starts = [p for p in range(len(ids) - n + 1) if ids[p : p + n] == bare.ids]
    if len(starts) != 1:
        return None
    p = starts[0]
    cuts = ((0, p), (p + n, len(ids)))
    out = [Tokens(np.array(ids[a:b], dtype=np.int64), np.array(full.special_tokens_mask[a:b], dtype=np.int8),
                  np.array(full.offsets[a:b], dtype=np.int64).reshape(b - a, 2)) for a, b in cuts]
    return out[0], out[1]


def _agree(a: Tokens, i: int, b: Tokens, j: int, count: int) -> bool:
    """Whether `count` tokens of `a` from i and of `b` from j are the same tokens at the same spans."""
    return (np.array_equal(a.ids[i : i + count], b.ids[j : j + count])
            and np.array_equal(a.offsets[i : i + count], b.offsets[j : j + count])
            and np.array_equal(a.special[i : i + count], b.special[j : j + count]))


def _stitch_point(cur: Tokens, keep: int, nxt: Tokens) -> tuple[int, int] | None:
    """(i, j): cur's tokens from `keep` to i and nxt's from j on are the text's, or None where they never agree."""
    last = len(cur.ids) - EDGE_TOKENS - AGREE_TOKENS  # an agreeing stretch must end this far before cur's cut
    if last < 0 or len(nxt.ids) < EDGE_TOKENS + AGREE_TOKENS:
        return None
    starts = cur.offsets[:, 0]
    for j in range(EDGE_TOKENS, len(nxt.ids) - AGREE_TOKENS + 1):
        if j > EDGE_TOKENS and nxt.offsets[j, 0] == nxt.offsets[j - 1, 0]:
            continue  # inside a character split into several tokens: stitch at its first token only
        i = int(np.searchsorted(starts, nxt.offsets[j, 0], side="left"))
        if i > last:
            return None
        if i >= keep and i < len(starts) and starts[i] == nxt.offsets[j, 0] and _agree(cur, i, nxt, j, AGREE_TOKENS):
            return i, j
    return None


class _Out:
    """The stitched tokens, written into arrays sized for one token per character (pages never written cost no
    memory) that grow by doubling when a text has more tokens than characters; no list of parts to join at the end
    (a join's copy on top of its parts was the largest cost)."""

    def __init__(self, capacity: int):
        self.n = 0
        self.arrays = Tokens(np.empty(capacity, np.int64), np.empty(capacity, np.int8), np.empty((capacity, 2), np.int64))

    def add(self, tokens: Tokens, start: int = 0, end: int | None = None) -> None:
        """Append tokens[start:end]."""
        end = len(tokens.ids) if end is None else end
        grown = self.n + max(0, end - start)
        if grown > len(self.arrays.ids):
            size = max(grown, 2 * len(self.arrays.ids))
            self.arrays = Tokens(*(np.concatenate([a[: self.n], np.empty((size - self.n, *a.shape[1:]), a.dtype)])
                                   for a in self.arrays))
        for into, source in zip(self.arrays, tokens):
            into[self.n : grown] = source[start:end]
        self.n = grown

    def result(self) -> Tokens:
        return Tokens(*(a[: self.n] for a in self.arrays))


def _stitched(backend: tokenizers.Tokenizer, text: str, template: tuple[Tokens, Tokens], piece_chars: int,
              overlap_chars: int) -> Tokens:
    """The template's prefix, the text's tokens one piece at a time (stitched where consecutive pieces agree), and
    the template's suffix."""
    prefix, suffix = template
    out = _Out(len(text) + len(prefix.ids) + len(suffix.ids))
    out.add(prefix)
    low, high = 0, min(len(text), piece_chars)
    cur, keep = _encode(backend, text, low, high), 0  # cur's tokens from `keep` on are the text's
    overlap = overlap_chars
    while high < len(text):
        nxt_low = max(low + 1, high - overlap)
        nxt_high = min(len(text), nxt_low + piece_chars)
        nxt = _encode(backend, text, nxt_low, nxt_high)
        found = _stitch_point(cur, keep, nxt)
        if found is not None:
            out.add(cur, keep, found[0])
            cur, keep, low, high, overlap = nxt, found[1], nxt_low, nxt_high, overlap_chars
            continue
        # no agreement (a word longer than the overlap): the same piece again, twice as long, a wider overlap
        position = None if keep == 0 else cur.offsets[keep, 0]
        high = min(len(text), low + 2 * (high - low))
        overlap *= 2
        cur = _encode(backend, text, low, high)
        keep = 0 if position is None else int(np.searchsorted(cur.offsets[:, 0], position, side="left"))
    out.add(cur, keep)
    out.add(suffix)
    return out.result()

"""Tokenising a batch of texts with character offsets, as the statistics pass and the methods' own passes need them.

Memory: a fast tokenizer's encodings cost ~300 bytes per token until converted, so texts are tokenised
`BATCH_TEXTS` at a time (10^6 rows at once passed 9 GB), and a text longer than `LONG_TEXT_CHARS` characters in
pieces (`pieces.encode_long`: the same tokens, a piece's encoding at a time).
"""
from __future__ import annotations

import gc
import itertools
from contextlib import contextmanager
from typing import Iterator, Union

import numpy as np
import tokenizers
from transformers import PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from . import pieces

#: Texts per batched tokenizer call (each call is still parallel in fast tokenizers).
BATCH_TEXTS = 4096
#: Texts longer than this many characters are tokenised in pieces (where the tokenizer's backend is called directly).
LONG_TEXT_CHARS = pieces.PIECE_CHARS

Ids = Union[list[int], np.ndarray]
Offsets = Union[list[tuple[int, int]], np.ndarray, None]


def encode_texts(tokenizer, texts: list[str], *, arrays: bool = False) -> list[tuple[Ids, Offsets]]:
    """(ids, offsets) of every text with `add_special_tokens=True`, in batched calls (parallel in fast tokenizers);
    offsets are None for slow tokenizers. Special tokens appended after the text (an EOS) are dropped: they are not
    text.

    arrays : offsets as (n, 2) int64 arrays rather than lists of tuples, and a long text's ids as an int64 array
        (short texts' ids stay lists: the statistics pass feeds lists fastest); else lists throughout.
    """
    if not texts:
        return []
    with gc_paused():  # the encodings' lists make thousands of tuples a text: no collection between them
        return _encode_texts(tokenizer, texts, arrays)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector inside the block (as it was after it): converting encodings makes
    container objects only, with no cycles, and every few hundred set off a collection (18% of tokenising measured,
    more in a process holding many objects)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _encode_texts(tokenizer, texts: list[str], arrays: bool) -> list[tuple[Ids, Offsets]]:
    """`encode_texts`, with the collector paused by the caller."""
    backend = plain_backend(tokenizer)
    bos_id = tokenizer.bos_token_id
    out: list[tuple[Ids, Offsets]] = []
    for begin in range(0, len(texts), BATCH_TEXTS):
        chunk = texts[begin : begin + BATCH_TEXTS]
        if backend is None:
            out += [_drop_trailing_specials(ids, special, spans, bos_id, arrays)
                    for ids, special, spans in _wrapper_encode(tokenizer, chunk)]
            continue
        long = [i for i, text in enumerate(chunk) if len(text) > LONG_TEXT_CHARS]
        found = _long_encodings(backend, chunk, long)
        short = [text for i, text in enumerate(chunk) if i not in found] if found else chunk
        encoded = iter(backend.encode_batch(short, add_special_tokens=True) if short else ())
        for i in range(len(chunk)):
            if i in found:
                out.append(_drop_trailing_specials(*found.pop(i), bos_id, arrays))
            else:
                e = next(encoded)
                out.append(_drop_trailing_specials(e.ids, e.special_tokens_mask, e.offsets, bos_id, arrays))
    return out


def _long_encodings(backend: tokenizers.Tokenizer, chunk: list[str], long: list[int]) -> dict[int, tuple]:
    """(ids, special mask, offsets) arrays of the long texts of a chunk (by index), tokenised in pieces."""
    found = {}
    for i in long:
        tokens = pieces.encode_long(backend, chunk[i])
        if tokens is not None:  # else tokenised whole with the others
            found[i] = tokens
    return found


def _wrapper_encode(tokenizer, texts: list[str]) -> list[tuple]:
    """(ids, special mask, offsets or None) of each text through the tokenizer's own call (slow or custom ones)."""
    try:
        enc = tokenizer(texts, add_special_tokens=True, return_offsets_mapping=True, return_special_tokens_mask=True)
        offsets = list(enc["offset_mapping"])  # per text: a list of (start, end)
    except (NotImplementedError, ValueError):  # slow tokenizers have no offsets
        enc = tokenizer(texts, add_special_tokens=True, return_special_tokens_mask=True)
        offsets = [None] * len(texts)
    return list(zip(enc["input_ids"], enc["special_tokens_mask"], offsets))


def plain_backend(tokenizer) -> tokenizers.Tokenizer | None:
    """The fast tokenizer's backend when calling it directly runs exactly what `tokenizer(texts,
    add_special_tokens=True)` runs (transformers' own fast-tokenizer call, no truncation or padding set on the
    backend, special tokens not split), else None.

    On a GPU host the backend's batch call is parallel and quick; transformers' wrapper then spent most of the time
    before the first batch building each text's lists again (0.11 s for 2,000 texts on an H100 machine).
    """
    kind = type(tokenizer)
    if kind.__call__ is not PreTrainedTokenizerBase.__call__ or kind._encode_plus is not PreTrainedTokenizerFast._encode_plus:
        return None  # a tokenizer class of its own may tokenise otherwise: take its call
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if not isinstance(backend, tokenizers.Tokenizer) or backend.truncation is not None or backend.padding is not None:
        return None
    if backend.encode_special_tokens != bool(getattr(tokenizer, "split_special_tokens", False)):
        return None
    return backend


def _drop_trailing_specials(ids, special, offsets, bos_id: int | None, arrays: bool) -> tuple[Ids, Offsets]:
    """(ids, offsets) without the special tokens a tokenizer appends after the text (a leading BOS stays); with
    `arrays`, offsets as an (n, 2) int64 array (a long text's ids stay an array), else lists."""
    end = len(ids)
    while end > 0 and special[end - 1] and (end > 1 or ids[0] != bos_id):
        end -= 1
    if isinstance(ids, np.ndarray):  # a long text, tokenised in pieces
        if arrays:
            return ids[:end], offsets[:end]
        return ids[:end].tolist(), list(map(tuple, offsets[:end].tolist()))
    if offsets is None:
        return list(ids[:end]), None
    if arrays:
        return list(ids[:end]), np.fromiter(itertools.chain.from_iterable(offsets[:end]), np.int64, 2 * end).reshape(-1, 2)
    return list(ids[:end]), offsets[:end]

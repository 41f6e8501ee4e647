"""Token frequency tables over a reference corpus: the calibration artifact of DC-PDD.

DC-PDD weights each token by how rare it is in general text: with ``count(v)`` the number of
*occurrences* of token id ``v`` in a reference corpus tokenised by the target model's tokenizer,
``N`` the corpus' total token count and ``|V|`` the model's logits width (which may exceed
``len(tokenizer)``), ``f(v) = (count(v) + 1) / (N + |V|)`` (Laplace smoothing).

A `FrequencyTable` is built once per tokenizer by streaming a corpus (`build_frequency_table`),
saved as a pickle-free ``.npz`` with the tokenizer's fingerprint and a corpus description, and
loaded by path (`load_frequency_table`), which refuses a table built with another tokenizer.
"""
from __future__ import annotations

import itertools
import json
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...inputs.corpus import describe_sources, iter_corpus_texts
from ...model.identity import tokenizer_fingerprint

FORMAT_VERSION = 1

#: progress(n_texts_done, total): total is None because a streamed corpus has no known length.
Progress = Callable[[int, "int | None"], None]


@dataclass(frozen=True)
class FrequencyTable:
    """Occurrence counts of every token id of a tokenizer over a reference corpus (read-only once made)."""

    counts: np.ndarray  # int64, shape (logits width,)
    tokenizer_fingerprint: str
    corpus: str
    n_texts: int
    total: int = field(init=False)
    """N: the total number of tokens counted."""

    def __post_init__(self) -> None:
        given = np.asarray(self.counts)
        counts = np.array(given, dtype=np.int64)  # the table's own copy, so N stays its sum
        if counts.shape != given.shape or not np.array_equal(counts, given):
            raise ValueError("frequency table counts must be whole numbers")
        counts.setflags(write=False)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "total", int(counts.sum()))

    def frequencies(self, token_ids: np.ndarray | None = None) -> np.ndarray:
        """Laplace-smoothed frequencies (count + 1) / (N + |V|), so unseen tokens get a small non-zero f: of every
        token id, or of `token_ids` only (what one text needs, without the whole vocabulary's)."""
        counts = self.counts if token_ids is None else self.counts[token_ids]
        return (counts.astype(np.float64) + 1.0) / float(self.total + len(self.counts))

    def save(self, path: str | Path) -> Path:
        """Write the table to a compressed ``.npz`` (metadata as a JSON string; no pickle) and return its path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "format": "mia_core.frequency",
            "version": FORMAT_VERSION,
            "tokenizer_fingerprint": self.tokenizer_fingerprint,
            "corpus": self.corpus,
            "n_texts": int(self.n_texts),
        }
        tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp.npz")  # unique per writer; savez wants .npz
        np.savez_compressed(tmp, counts=np.asarray(self.counts, dtype=np.int64), meta=np.array(json.dumps(meta)))
        tmp.replace(path)
        return path


def _encoder(tokenizer: Any, probe: list[str]) -> Callable[[list[str]], list[list[int]]]:
    """The fastest batch encoder that agrees with ``tokenizer(batch, add_special_tokens=False)`` on `probe`.

    ``encode_batch_fast`` of the Rust backend (a copy with padding/truncation off) skips offset
    computation and is ~1.6x faster than the transformers call; it is used only if it gives identical
    ids on the first batch, otherwise the transformers call is used.
    """

    def slow(batch: list[str]) -> list[list[int]]:
        return tokenizer(batch, add_special_tokens=False)["input_ids"]

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "encode_batch_fast"):
        return slow
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(backend.to_str())
    copy.no_padding()
    copy.no_truncation()

    def fast(batch: list[str]) -> list[list[int]]:
        return [enc.ids for enc in copy.encode_batch_fast(batch, add_special_tokens=False)]

    return fast if fast(probe) == slow(probe) else slow


def build_frequency_table(
    tokenizer: Any,
    texts_iterable: Any,
    vocab_size: int | None = None,
    progress: Progress | None = None,
    *,
    batch_size: int = 1000,
    corpus_description: str | None = None,
) -> FrequencyTable:
    """Count token occurrences over a streamed corpus, holding only one batch of texts in memory.

    `texts_iterable` is anything `iter_corpus_texts` accepts (paths, directories, iterables of texts or
    records). `vocab_size` is the model's logits width (default ``len(tokenizer)``); an id at or above it
    raises ValueError. `progress(n_texts_done, None)` is called after each batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    vocab_size = len(tokenizer) if vocab_size is None else int(vocab_size)
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
    counts = np.zeros(vocab_size, dtype=np.int64)
    texts = iter_corpus_texts(texts_iterable)
    encode = None
    n_texts = 0
    while batch := list(itertools.islice(texts, batch_size)):
        if encode is None:
            encode = _encoder(tokenizer, batch)
        ids = np.fromiter(itertools.chain.from_iterable(encode(batch)), dtype=np.int64)
        if ids.size:
            top = int(ids.max())
            if top >= vocab_size:
                raise ValueError(
                    f"token id {top} >= vocab_size {vocab_size}: the table must be as wide as the model's logits"
                )
            counts += np.bincount(ids, minlength=vocab_size)
        n_texts += len(batch)
        if progress is not None:
            progress(n_texts, None)
    return FrequencyTable(
        counts=counts,
        tokenizer_fingerprint=tokenizer_fingerprint(tokenizer),
        corpus=corpus_description if corpus_description is not None else describe_sources(texts_iterable),
        n_texts=n_texts,
    )


def load_frequency_table(path: str | Path, tokenizer: Any = None) -> FrequencyTable:
    """Load a saved table; with `tokenizer`, refuse one built with a different tokenizer (ids would not match)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"frequency table not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            counts = np.asarray(data["counts"], dtype=np.int64)
            meta = json.loads(str(data["meta"]))
        table = FrequencyTable(
            counts=counts,
            tokenizer_fingerprint=str(meta["tokenizer_fingerprint"]),
            corpus=str(meta["corpus"]),
            n_texts=int(meta["n_texts"]),
        )
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a valid frequency table ({type(exc).__name__}: {exc})") from None
    if counts.ndim != 1 or (counts < 0).any():
        raise ValueError(f"{path}: not a valid frequency table (counts must be a 1-D non-negative array)")
    if tokenizer is not None:
        expected = tokenizer_fingerprint(tokenizer)
        if expected != table.tokenizer_fingerprint:
            raise ValueError(
                f"frequency table {path} was built with tokenizer {table.tokenizer_fingerprint}, "
                f"model uses {expected}: rebuild it with the model's tokenizer"
            )
    return table

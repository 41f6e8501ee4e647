"""Stable identities (hashes) of texts, tokenizers and weight files, used as cache keys."""
from __future__ import annotations

import hashlib
import json
import uuid
import weakref
from pathlib import Path

from ..paths import cache_root


def text_sha256(text: str) -> str:
    """SHA-256 of the UTF-8 encoding of a text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tokenizer_fingerprint(tokenizer) -> str:
    """Hash of a tokenizer's full definition (vocabulary, merges, normalizer, special tokens).

    Remembered per tokenizer object, its size and its added tokens (a 128k vocabulary's definition takes 30–40 ms to
    write out, and a scoring call checks its frequency table twice): a token added, or an existing one made special,
    in place is hashed again. A normaliser or post-processor swapped in place after first use is not seen, as the
    model's own fingerprint, taken when it is loaded, does not see it either.
    """
    shape = (len(tokenizer) if hasattr(tokenizer, "__len__") else None,
             len(getattr(tokenizer, "added_tokens_decoder", None) or ()))
    try:
        known = _FINGERPRINTS.get(tokenizer)
    except TypeError:  # an object that cannot be weakly referenced: hashed every time
        known = None
    if known is not None and known[0] == shape:
        return known[1]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        payload = backend.to_str()
    else:  # slow tokenizer: the vocabulary is what determines the ids
        payload = json.dumps(tokenizer.get_vocab(), sort_keys=True)
    fingerprint = hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
    try:
        _FINGERPRINTS[tokenizer] = (shape, fingerprint)
    except TypeError:
        pass
    return fingerprint


#: tokenizer → (its size and added tokens' count when hashed, its fingerprint); an entry goes with its tokenizer.
_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def file_sha256(path: str | Path, *, chunk_bytes: int = 1 << 22) -> str:
    """Full SHA-256 of a file, memoised in the cache by (path, size, mtime) so big weights hash once."""
    path = Path(path).resolve()
    st = path.stat()
    memo_key = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    memo = cache_root() / "file-hashes" / memo_key
    if memo.exists():
        return memo.read_text().strip()
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk_bytes):
            digest.update(block)
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_name(f"{memo.name}.{uuid.uuid4().hex}.tmp")  # unique per writer: threads and processes
    tmp.write_text(digest.hexdigest())
    tmp.replace(memo)
    return digest.hexdigest()

"""Benchmark helpers: deterministic offline English texts of a given token length."""
from __future__ import annotations

import pydoc
import sys


def stdlib_prose(n_texts: int, n_tokens: int, tokenizer) -> list[str]:
    """`n_texts` texts of about `n_tokens` tokens cut from the standard library's docstrings."""
    import collections, json, os, re, string, textwrap, typing, zlib  # noqa: E401,F401  (prose sources)

    words: list[str] = []
    for name in sorted(sys.modules):
        module = sys.modules[name]
        if not name.startswith("_") and "." not in name:
            words += pydoc.getdoc(module).split()
            for attr in sorted(dir(module)):
                obj = getattr(module, attr, None)
                if callable(obj) and not attr.startswith("_"):
                    words += pydoc.getdoc(obj).split()
        if len(words) > n_texts * n_tokens * 2:
            break
    texts, start = [], 0
    while len(texts) < n_texts:
        chunk = words[start : start + n_tokens]
        while len(tokenizer(" ".join(chunk))["input_ids"]) > n_tokens:
            chunk = chunk[:-3]
        texts.append(" ".join(chunk))
        start = (start + len(chunk)) % max(1, len(words) - n_tokens)
    return texts

"""Benchmark helpers: deterministic offline English texts of a given token length; the authors' scoring loop."""
from __future__ import annotations

import pydoc
import sys
import zlib

import numpy as np
import torch
import torch.nn.functional as F

from mia_core.model.language_model import LanguageModel


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


@torch.inference_mode()
def authors_loop(lm: LanguageModel, texts: list[str], k: float = 0.2) -> dict[str, list[float]]:
    """One text at a time, as the Min-K%++ script: `labels=` loss, softmax and log_softmax materialised."""
    out = {"loss": [], "zlib": [], "min_k": [], "min_k_pp": []}
    boundary = lm._boundary
    for text in texts:
        ids = torch.tensor([[boundary] + lm.tokenizer(text)["input_ids"]], device=lm.device)
        output = lm.model(ids, labels=ids)
        ll = -output.loss.item()
        logits = output.logits[0, :-1]
        probs = F.softmax(logits, dim=-1)
        log_probs = F.log_softmax(logits, dim=-1)
        token_log_probs = log_probs.gather(-1, ids[0, 1:, None]).squeeze(-1)
        mu = (probs * log_probs).sum(-1)
        sigma = (probs * torch.square(log_probs)).sum(-1) - torch.square(mu)
        n = max(1, int(len(token_log_probs) * k))
        out["loss"].append(ll)
        out["zlib"].append(ll / len(zlib.compress(bytes(text, "utf-8"))))
        out["min_k"].append(float(np.mean(np.sort(token_log_probs.float().cpu().numpy())[:n])))
        mink_plus = (token_log_probs - mu) / sigma.sqrt()
        out["min_k_pp"].append(float(np.mean(np.sort(mink_plus.float().cpu().numpy())[:n])))
    return out

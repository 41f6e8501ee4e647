"""Prefix conditioning for ReCaLL and Con-ReCall: log-probs of a text's scored tokens after known texts.

The conditional sequence is `F(P) + F(x)` (docs/methods.md, "recall"): `F` is what the statistics
pass feeds for a text (`LanguageModel.fed_ids`: the boundary token first under bos="auto"), so the
tokens scored here are exactly those of the shared pass and pair up with its log-probs one by one.
The prefix's key-value cache is computed once per fitted prefix and reused for every text, in
right-padded batches (`reuse_prefix=False` re-encodes the prefix with every text, as the authors'
code does; bench/recall.py compares the two).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from ...model.forward import head_logits, pad_right, plain_head
from ...model.language_model import LanguageModel

#: Text tokens per batch of the cached-prefix pass (the cache is shared, so only text tokens count).
BATCH_TOKENS = {"cpu": 2048, "cuda": 16384}


@dataclass(frozen=True)
class FittedPrefix:
    """The shots kept in front of a text (the last `n_kept` of them) and how many text tokens are scored."""

    n_kept: int
    n_scored: int
    truncated: bool


@dataclass(frozen=True)
class Conditioning:
    """A text's conditional log-probs: `logprob[i]` pairs with the shared pass's token i (first `len` tokens)."""

    logprob: np.ndarray
    fitted: FittedPrefix


def join_shots(shots: Sequence[str], n_kept: int) -> str:
    """The prefix text of the last `n_kept` shots, joined with "" (the authors' and fast-mia's joiner)."""
    return "".join(shots[len(shots) - n_kept:])


def prefix_lengths(lm: LanguageModel, shots: Sequence[str], bos: str) -> list[int]:
    """`len(F(P_j))` for P_j = the last j shots, j = 1…len(shots) (index j−1)."""
    return [len(lm.fed_ids(join_shots(shots, j), bos)) for j in range(1, len(shots) + 1)]


def fit_prefix(lengths: Sequence[int], n_text: int, max_length: int) -> FittedPrefix:
    """Most trailing shots that fit with the text's `n_text` scored tokens; else the last shot and fewer tokens.

    The sequence fed is `F(P) + F(x)[:1 + n]`: it must hold `lengths[j-1] + 1 + n ≤ max_length`.
    """
    for j in range(len(lengths), 0, -1):
        if lengths[j - 1] + 1 + n_text <= max_length:
            return FittedPrefix(j, n_text, False)
    m = max_length - 1 - lengths[0]
    if m < 1:
        raise ValueError(f"the shortest shot alone takes {lengths[0]} of the model's {max_length} tokens: no text "
                         "token can be scored after it (use shorter shots)")
    return FittedPrefix(1, min(m, n_text), True)


@torch.inference_mode()
def conditional_logprobs(lm: LanguageModel, prefix: list[int], sequences: Sequence[list[int]], *,
                         reuse_prefix: bool = True, batch_tokens: int | None = None) -> list[np.ndarray]:
    """log p(seq[t] | prefix, seq[:t]) for t = 1…len(seq)−1 of every sequence (float32 log-softmax).

    reuse_prefix : compute the prefix's key-value cache once and batch the sequences against it;
        False runs `prefix + seq` as one sequence per text (the authors' way; the baseline of bench/recall.py).
    """
    if not reuse_prefix:
        return [_joint(lm, prefix, seq) for seq in sequences]
    split = plain_head(lm.model)
    body = split[0] if split is not None else lm.model
    device = lm.device
    prefix_t = torch.tensor([prefix], device=device)
    cache = body(input_ids=prefix_t, use_cache=True).past_key_values
    if not all(type(layer) is DynamicLayer for layer in cache.layers):  # sliding or quantised caches: no reuse
        return [_joint(lm, prefix, seq) for seq in sequences]
    layers = [(layer.keys, layer.values) for layer in cache.layers]
    budget = batch_tokens or BATCH_TOKENS.get(device.type, BATCH_TOKENS["cuda"])
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))  # similar lengths pad less
    out: list[np.ndarray | None] = [None] * len(sequences)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and len(sequences[order[end]]) * (end + 1 - start) <= budget:
            end += 1
        batch = [sequences[i] for i in order[start:end]]
        for i, lp in zip(order[start:end], _cached_batch(lm, split, body, layers, len(prefix), batch)):
            out[i] = lp
        start = end
    return out  # type: ignore[return-value]


def _cached_batch(lm: LanguageModel, split, body, layers, n_prefix: int, batch: list[list[int]]) -> list[np.ndarray]:
    """One right-padded batch of sequences against the prefix cache (expanded, never written to)."""
    device, b = lm.device, len(batch)
    cache = DynamicCache(ddp_cache_data=[(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1)) for k, v in layers])
    ids, mask = pad_right(batch, lm.pad_id)
    full_mask = torch.cat([torch.ones(b, n_prefix, dtype=mask.dtype), mask], dim=1)
    out = body(input_ids=ids.to(device), attention_mask=full_mask.to(device), past_key_values=cache, use_cache=True)
    results = []
    for row, seq in enumerate(batch):
        rows = torch.arange(len(seq) - 1, device=device)
        if split is not None:
            logits = head_logits(out[0][row, rows], split[1])
        else:
            logits = out.logits[row, rows]
        results.append(_target_logprobs(logits, seq))
    return results


def _joint(lm: LanguageModel, prefix: list[int], seq: list[int]) -> np.ndarray:
    """One full pass over `prefix + seq`, the prefix re-encoded (the reference way)."""
    logits = lm.model(input_ids=torch.tensor([prefix + seq], device=lm.device), use_cache=False).logits[0]
    return _target_logprobs(logits[len(prefix): len(prefix) + len(seq) - 1], seq)


def _target_logprobs(logits: torch.Tensor, seq: list[int]) -> np.ndarray:
    """log p of seq[1:] from the logits of rows that predict them, float32 log-softmax (float64 models: float64)."""
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    logp = torch.log_softmax(logits.to(dtype), dim=-1)
    targets = torch.tensor(seq[1:], device=logits.device)
    return logp.gather(-1, targets[:, None]).squeeze(-1).cpu().numpy()




def condition(lm: LanguageModel, shots: Sequence[str], stats: Sequence, *, reuse_prefix: bool = True) -> list[Conditioning]:
    """Every text's conditional log-probs after the shots, each prefix fitted to the context on its own.

    Texts that keep the same shots share one prefix cache; a text whose tokens do not all fit after
    the last shot is scored on its first tokens only (`FittedPrefix.truncated`).
    """
    if not stats:
        return []
    bos = stats[0].bos_policy
    lengths = prefix_lengths(lm, shots, bos)
    fed, fitted = [], []
    for st in stats:
        ids = lm.fed_ids(st.text, bos)
        if ids[1:1 + st.n_scored] != st.token_ids.tolist():
            raise ValueError("the statistics were not computed by this model's tokenizer under this BOS policy")
        fed.append(ids)
        fitted.append(fit_prefix(lengths, st.n_scored, lm.max_length))
    out: list[Conditioning | None] = [None] * len(stats)
    for n_kept in sorted({f.n_kept for f in fitted}):
        rows = [i for i, f in enumerate(fitted) if f.n_kept == n_kept]
        prefix = lm.fed_ids(join_shots(shots, n_kept), bos)
        seqs = [fed[i][:1 + fitted[i].n_scored] for i in rows]
        for i, lp in zip(rows, conditional_logprobs(lm, prefix, seqs, reuse_prefix=reuse_prefix)):
            out[i] = Conditioning(lp, fitted[i])
    return out  # type: ignore[return-value]


def reference_conditioning(lm: LanguageModel, shots: Sequence[str], text: str) -> tuple[float, float, int]:
    """The authors' ReCaLL terms: (LL(x|P) over all of enc(x), LL(x) over enc(x)[1:], shots kept).

    The prefix and the text are tokenized separately, with special tokens, and concatenated
    (ruoyuxie/recall `get_conditional_ll`), so numerator and denominator cover different tokens, as in
    their code. Whole shots are dropped from the front until prefix and text fit the context.
    """
    ids = list(lm.tokenizer(text)["input_ids"])
    for n_kept in range(len(shots), 0, -1):
        prefix = list(lm.tokenizer(join_shots(shots, n_kept))["input_ids"])
        if prefix and len(prefix) + len(ids) <= lm.max_length and len(ids) >= 2:
            break
    else:
        raise ValueError(f"mode='reference' needs the last shot and the text ({len(ids)} tokens) to fit in "
                         f"{lm.max_length} tokens, and at least 2 text tokens")
    with torch.inference_mode():
        conditional = _joint(lm, prefix[:-1], prefix[-1:] + ids)
        unconditional = _joint(lm, [], ids)
    return float(np.mean(conditional, dtype=np.float64)), float(np.mean(unconditional, dtype=np.float64)), n_kept

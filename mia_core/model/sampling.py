"""Seeded sampling from a `LanguageModel`: continuations of many prompts in shared `generate` calls, each sample
drawn from its own generator so that a text's draws depend neither on text order nor on batching. A served model
samples on its server from the same per-sample seeds (`mia_core.model.served.generation`).

Shared by the black-box methods that read only sampled text (SaMIA, N-gram coverage; docs/methods.md, "samia").
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from .identity import text_sha256
from .language_model import LanguageModel

#: Tokens (rows × row length) per `generate` call; halved on a CUDA out-of-memory error.
SAMPLE_TOKENS = 1 << 16


@dataclass(frozen=True)
class Sampling:
    """How to sample: `n` samples per text, seeded by (seed, sha256(text), j), filtered as Hugging Face's warpers
    (temperature, then top-k with 0 for no cut, then top-p with 1 for no cut)."""

    n: int
    seed: int
    temperature: float
    top_k: int
    top_p: float


def sample_seeds(seed: int, text: str, n: int) -> list[int]:
    """One 63-bit generator seed per sample from (seed, sha256(text), j): draws depend on nothing else."""
    base = f"{int(seed)}|{text_sha256(text)}"
    return [int(hashlib.sha256(f"{base}|{j}".encode()).hexdigest()[:16], 16) >> 1 for j in range(n)]


def filter_scores(scores: torch.Tensor, *, temperature: float, top_k: int, top_p: float, n_tokens: int) -> torch.Tensor:
    """Logits (rows, width) → temperature-scaled logits with filtered tokens at −inf (ids ≥ n_tokens, top-k, top-p).

    Top-k keeps ties with the k-th; top-p keeps the most likely tokens until their mass reaches p
    (the first always), as Hugging Face's warpers, which apply temperature first too.
    """
    scores = scores.float() / temperature
    scores[:, n_tokens:] = -math.inf  # logit rows with no token (Pythia: 50277..50303) are never drawn
    if 0 < top_k < n_tokens:
        kth = torch.topk(scores, top_k, dim=-1).values[:, -1:]  # (rows, 1)
        scores = scores.masked_fill(scores < kth, -math.inf)
    if top_p < 1:
        ordered, order = torch.sort(scores, dim=-1, descending=True)  # (rows, width)
        probs = ordered.softmax(-1)
        before = probs.cumsum(-1) - probs  # mass of the more likely tokens
        drop = before >= top_p
        drop[:, 0] = False
        scores = scores.masked_fill(drop.scatter(1, order, drop), -math.inf)
    return scores


class SeededSampler(LogitsProcessor):
    """Filtering plus Gumbel noise from each row's own generator, so greedy decoding draws from the filtered softmax
    (Gumbel-max): a row's samples depend on its seed only, not on the other rows of the batch."""

    def __init__(self, seeds: list[int], sampling: Sampling, n_tokens: int, device: torch.device):
        self.generators = [torch.Generator(device).manual_seed(s) for s in seeds]
        self.sampling, self.n_tokens = sampling, n_tokens

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        s = self.sampling
        scores = filter_scores(scores, temperature=float(s.temperature), top_k=int(s.top_k), top_p=float(s.top_p),
                               n_tokens=self.n_tokens)  # (rows, width)
        exp = torch.stack([torch.empty(scores.shape[1], device=scores.device).exponential_(generator=g)
                           for g in self.generators])  # (rows, width), Exp(1) draws
        return scores - exp.clamp_min(torch.finfo(exp.dtype).tiny).log()  # + Gumbel(0, 1)


@runtime_checkable
class SamplesItself(Protocol):
    """A model that samples where it runs (a served model: its server draws each sample from the sample's seed):
    `sample_continuations` asks it instead of running `generate` here."""

    def sample_continuations(self, prompts: dict[str, list[int]], budgets: dict[str, int],
                             sampling: Sampling) -> dict[str, list[list[int]]]: ...


def sample_continuations(lm: LanguageModel | SamplesItself, prompts: dict[str, list[int]], budgets: dict[str, int],
                         sampling: Sampling) -> dict[str, list[list[int]]]:
    """Text → its `sampling.n` continuations (token ids after the prompt, at most `budgets[text]` of them), for texts
    keyed to their prompt ids; one interface for every model: a model that samples itself is asked (`SamplesItself`),
    an in-process one samples here.

    In process, texts with prompts of equal length share `generate` calls (no padding, so no row sees another's);
    a call runs to its longest budget and each row is cut to its own text's budget (a row's first tokens do not
    depend on how long it runs on). Calls hold ≤ `SAMPLE_TOKENS` tokens, halved on a CUDA out-of-memory error.
    Rows that stop early are filled with the pad (or EOS) id, which callers decode as a special token.
    """
    if isinstance(lm, SamplesItself):
        return lm.sample_continuations(prompts, budgets, sampling)
    by_length: dict[int, list[str]] = {}
    for text, ids in prompts.items():
        by_length.setdefault(len(ids), []).append(text)
    out: dict[str, list[list[int]]] = {}
    for length in sorted(by_length):
        group = sorted(by_length[length], key=text_sha256)
        per_call = max(1, SAMPLE_TOKENS // ((length + max(budgets[t] for t in group)) * sampling.n))  # texts per call
        done = 0
        while done < len(group):
            chunk = group[done:done + per_call]
            try:
                rows = _generate(lm, [prompts[t] for t in chunk], chunk, sampling, max(budgets[t] for t in chunk))
                out.update((t, [row[:budgets[t]] for row in r]) for t, r in zip(chunk, rows))
                done += len(chunk)
            except torch.cuda.OutOfMemoryError:
                if per_call == 1:
                    raise
                torch.cuda.empty_cache()
                per_call //= 2
    return out


def _generate(lm: LanguageModel, ids: list[list[int]], texts: list[str], sampling: Sampling,
              max_new: int) -> list[list[list[int]]]:
    """One `generate` call: every text's prompt repeated `n` times, one seeded sampler row each; per text, its rows'
    continuation ids."""
    n, tok = int(sampling.n), lm.tokenizer
    input_ids = torch.tensor(ids, device=lm.device).repeat_interleave(n, dim=0)  # (texts·n, prompt)
    sampler = SeededSampler([s for t in texts for s in sample_seeds(sampling.seed, t, n)], sampling, len(tok),
                            lm.device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        out = lm.model.generate(  # (texts·n, ≤ prompt + max_new)
            input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False, num_beams=1,
            max_new_tokens=max_new, logits_processor=LogitsProcessorList([sampler]), pad_token_id=pad)
    continuations = out[:, input_ids.shape[1]:].tolist()
    return [continuations[i * n:(i + 1) * n] for i in range(len(texts))]

"""SaMIA's sampling: seeded continuations of each text's prompt in shared `generate` calls (torch, transformers).

Kept apart from the method's declaration (`mia_core.methods.samia`) so that reading the registry loads no torch.
"""
from __future__ import annotations

import hashlib
import math
import torch
from transformers import LogitsProcessor, LogitsProcessorList

from ...model.identity import text_sha256
from ...model.language_model import LanguageModel
from .params import SamiaParams

#: Tokens (rows × max_length) per `generate` call; halved on a CUDA out-of-memory error.
SAMPLE_TOKENS = 1 << 16


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

    def __init__(self, seeds: list[int], params: SamiaParams, n_tokens: int, device: torch.device):
        self.generators = [torch.Generator(device).manual_seed(s) for s in seeds]
        self.params, self.n_tokens = params, n_tokens

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        p = self.params
        scores = filter_scores(scores, temperature=float(p.temperature), top_k=int(p.top_k), top_p=float(p.top_p),
                               n_tokens=self.n_tokens)  # (rows, width)
        exp = torch.stack([torch.empty(scores.shape[1], device=scores.device).exponential_(generator=g)
                           for g in self.generators])  # (rows, width), Exp(1) draws
        return scores - exp.clamp_min(torch.finfo(exp.dtype).tiny).log()  # + Gumbel(0, 1)


def sample_outputs(lm: LanguageModel, prompts: dict[str, list[int]], params: SamiaParams) -> dict[str, list[str]]:
    """Text → its `n_samples` outputs (prompt + continuation, specials skipped), for texts keyed to their prompt ids.

    Texts with prompts of equal length share `generate` calls (no padding, so no row sees another's);
    the calls hold ≤ `SAMPLE_TOKENS` tokens, halved on a CUDA out-of-memory error.
    """
    cap, n = min(int(params.max_length), lm.max_length), int(params.n_samples)
    by_length: dict[int, list[str]] = {}
    for text, ids in prompts.items():
        by_length.setdefault(len(ids), []).append(text)
    out: dict[str, list[str]] = {}
    per_call = max(1, SAMPLE_TOKENS // (cap * n))  # texts per call
    for length in sorted(by_length):
        group = sorted(by_length[length], key=text_sha256)
        done = 0
        while done < len(group):
            chunk = group[done:done + per_call]
            try:
                out.update(zip(chunk, _generate(lm, [prompts[t] for t in chunk], chunk, params, cap)))
                done += len(chunk)
            except torch.cuda.OutOfMemoryError:
                if per_call == 1:
                    raise
                torch.cuda.empty_cache()
                per_call //= 2
    return out


def _generate(lm: LanguageModel, ids: list[list[int]], texts: list[str], params: SamiaParams, cap: int) -> list[list[str]]:
    """One `generate` call: every text's prompt repeated `n_samples` times, one seeded sampler row each."""
    n, tok = int(params.n_samples), lm.tokenizer
    input_ids = torch.tensor(ids, device=lm.device).repeat_interleave(n, dim=0)  # (texts·n, prompt)
    sampler = SeededSampler([s for t in texts for s in sample_seeds(params.seed, t, n)], params, len(tok), lm.device)
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.inference_mode():
        out = lm.model.generate(  # (texts·n, ≤ cap)
            input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False, num_beams=1,
            max_new_tokens=cap - input_ids.shape[1], logits_processor=LogitsProcessorList([sampler]), pad_token_id=pad)
    decoded = tok.batch_decode(out, skip_special_tokens=True)
    return [decoded[i * n:(i + 1) * n] for i in range(len(texts))]

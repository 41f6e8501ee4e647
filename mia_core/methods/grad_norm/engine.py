"""Gradient norms of a text's loss, one text at a time (the reference loop) or batched.

L(x) = −(1/n) Σ_t ℓ_t over exactly the tokens the shared statistics pass scores (ids built as
`LanguageModel._compute` builds them; the same truncation, or the same sliding windows whose gradients
add up), float32 log-softmax (float64 for float64 models). Kept per text: norms with columns
p = ∞, 1, 2 (`ORDERS`), one row per parameter tensor (wrt="params": unique tensors by identity, so tied
embeddings count once; only tensors that receive a gradient) or per fed position (wrt="inputs").

Batching, both exact:
- wrt="inputs": texts do not interact in a right-padded batch: one backward of Σ_s L_s gives each ∂L_s/∂E_s.
- wrt="params": a batched backward would mix the texts' weight gradients, so per-sample gradients come
  from `torch.func` (vmap of grad over `functional_call`; right padding needs no mask under causal
  attention). They all exist at once (batch × model size, at most `gradient_bytes`). On a CPU
  (bench/grad_norm.py, one thread) this is 1.1–1.8× faster than the loop for a 0.07M-parameter Llama
  but 0.83× for the 135M demo model (every per-sample gradient is dense, its 28M-entry embedding
  included), so batched=None takes it up to `VMAP_MAX_PARAMS` only (CUDA: not measured).
"""
from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from ...model.forward import pack_lengths, pad_right, split_windows
from ...model.language_model import LanguageModel
from ...model.reduce import stats_dtype

#: The p of each column of a norms array.
ORDERS = (math.inf, 1.0, 2.0)
#: Padded tokens per batch (activations and float32 logits of a batch live at once).
CPU_BATCH_TOKENS, CUDA_BATCH_TOKENS = 1024, 8192
#: Bytes of per-sample parameter gradients a batch may hold (batch = this // model size), CPU / CUDA share of free memory.
CPU_GRADIENT_BYTES, CUDA_GRADIENT_SHARE = 1 << 30, 0.3
#: Largest model (parameters) for which batched=None takes the per-sample path (measured: faster at 0.07M, slower at 135M).
VMAP_MAX_PARAMS = 5_000_000
#: Config attributes of routed-expert models: which tensors get a gradient depends on the text, so no vmap.
ROUTED_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")


@dataclass(frozen=True)
class TextGradient:
    """Norms of one text's loss gradient. norms : (pieces, 3) float64, columns `ORDERS`."""

    norms: np.ndarray
    loss: float
    n_scored: int
    long_text: str


@dataclass(frozen=True)
class Plan:
    """What is fed for one text: `ids` (the whole fed sequence) in `windows` (start, end, score_from)."""

    text: str
    ids: list[int]
    windows: list[tuple[int, int, int]]
    long_text: str

    @property
    def n_scored(self) -> int:
        return sum(end - start - score_from for start, end, score_from in self.windows)


def plans_for(lm: LanguageModel, texts: Sequence[str], bos: str, long_text: str) -> list[Plan]:
    """The fed ids and windows of each text, exactly as the shared statistics pass feeds them."""
    out = []
    for text, (ids, _) in zip(texts, lm._encode_many([str(t) for t in texts])):
        full = lm._with_boundary(ids, bos)
        if len(full) < 2:
            raise ValueError(f"no token to score in text {text[:40]!r} (empty, or a single token with bos='none')")
        if len(full) <= lm.max_length:
            out.append(Plan(text, full, [(0, len(full), 1)], "none"))
        elif long_text == "truncate":
            out.append(Plan(text, full[: lm.max_length], [(0, lm.max_length, 1)], "truncated"))
        else:
            out.append(Plan(text, full, split_windows(len(full), lm.max_length, lm.max_length // 2), "sliding"))
    return out


def unique_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """(name, tensor) of every parameter once, by identity (a tied embedding is one tensor, under its first name)."""
    seen: set[int] = set()
    out = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) not in seen:
            seen.add(id(p))
            out.append((name, p))
    return out


def tensor_norms(grad: torch.Tensor) -> torch.Tensor:
    """(..., m) gradients → (..., 3) norms ‖g‖_∞, ‖g‖_1, ‖g‖_2 over the last axis, in float32 at least.

    Plain `sum` (pairwise on CPU, a tree on CUDA), not `torch.linalg.vector_norm`: on a CPU its float32
    1-norm of a 28M-entry embedding gradient is off by 1–5% (naive accumulation).
    """
    g = grad.to(stats_dtype(grad.dtype)).abs()
    return torch.stack([g.amax(-1), g.sum(-1), g.square().sum(-1).sqrt()], dim=-1)


def finite_norms(norms: torch.Tensor, text: str) -> np.ndarray:
    """(pieces, 3) norms as float64 numpy; ValueError when the gradient had a non-finite entry."""
    if not torch.isfinite(norms[:, 0]).all():  # max |g| is finite iff every entry is
        raise ValueError(f"non-finite gradient for text {text[:40]!r}: half-precision gradients can overflow or "
                         "underflow; load the model in float32 (dtype='float32')")
    return norms.cpu().double().numpy()


@contextmanager
def gradients_on(model: nn.Module) -> Iterator[None]:
    """Eval mode, every parameter requiring grad, grad mode on; each flag restored afterwards (`.grad` is never touched)."""
    flags = [(p, p.requires_grad) for _, p in unique_parameters(model)]
    was_training = model.training
    model.eval()
    try:
        for p, _ in flags:
            p.requires_grad_(True)
        with torch.inference_mode(False), torch.enable_grad():
            yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(was_training)


def window_loss(lm: LanguageModel, ids: torch.Tensor, score_from: int, n_total: int) -> torch.Tensor:
    """Σ NLL of the window's scored tokens / n_total (the window's share of L); ids (T,)."""
    logits = lm.model(input_ids=ids[None], use_cache=False).logits[0, score_from - 1 : -1]  # (scored, vocab)
    logp = torch.log_softmax(logits.to(stats_dtype(logits.dtype)), dim=-1)
    return -logp.gather(-1, ids[score_from:, None]).sum() / n_total


def loop_param_norms(lm: LanguageModel, plans: Sequence[Plan]) -> list[TextGradient]:
    """One forward and backward per window of each text (`torch.autograd.grad`): the reference, any model."""
    names, params = zip(*unique_parameters(lm.model))
    out = []
    with gradients_on(lm.model):
        for plan in plans:
            total: list[torch.Tensor | None] = [None] * len(params)
            loss = 0.0
            for start, end, score_from in plan.windows:
                ids = torch.tensor(plan.ids[start:end], device=lm.device)
                part = window_loss(lm, ids, score_from, plan.n_scored)
                grads = torch.autograd.grad(part, params, allow_unused=True)
                total = [t if g is None else g if t is None else t + g for t, g in zip(total, grads)]
                loss += float(part.detach())
            norms = torch.stack([tensor_norms(g.reshape(-1)) for g in total if g is not None])  # (tensors, 3)
            out.append(TextGradient(finite_norms(norms, plan.text), loss, plan.n_scored, plan.long_text))
    return out


def input_norms(lm: LanguageModel, plans: Sequence[Plan], *, batch_tokens: int | None = None) -> list[TextGradient]:
    """Per-position norms of ∂L/∂E (E = the input-embedding output), one backward per right-padded batch.

    Texts are independent in a batch, so the batch's gradient holds each text's own; windows of a long
    text add their gradients at the positions they cover.
    """
    pieces = [(i, start, end, s) for i, plan in enumerate(plans) for start, end, s in plan.windows]
    budget = batch_tokens or (CUDA_BATCH_TOKENS if lm.device.type == "cuda" else CPU_BATCH_TOKENS)
    precision = stats_dtype(lm.dtype)
    width = lm.model.get_input_embeddings().weight.shape[1]
    grads = [torch.zeros(len(plan.ids), width, dtype=precision, device=lm.device) for plan in plans]  # (T, d) each
    losses = [0.0] * len(plans)
    embed = lm.model.get_input_embeddings()
    with gradients_on(lm.model):
        for batch in pack_lengths([end - start for _, start, end, _ in pieces], budget):
            seqs = [plans[pieces[j][0]].ids[pieces[j][1]:pieces[j][2]] for j in batch]
            ids, mask = pad_right(seqs, lm.pad_id)
            ids, mask = ids.to(lm.device), mask.to(lm.device)
            with torch.no_grad():
                leaf = embed(ids).requires_grad_(True)  # (b, W, d), the graph starts here
            logits = lm.model(inputs_embeds=leaf, attention_mask=mask, use_cache=False).logits  # (b, W, vocab)
            parts = []
            for b, j in enumerate(batch):
                owner, s = pieces[j][0], pieces[j][3]
                n = len(seqs[b])
                logp = torch.log_softmax(logits[b, s - 1 : n - 1].to(precision), dim=-1)  # (scored, vocab)
                parts.append(-logp.gather(-1, ids[b, s:n, None]).sum() / plans[owner].n_scored)
            (leaf_grad,) = torch.autograd.grad(torch.stack(parts).sum(), leaf)
            for b, j in enumerate(batch):
                owner, start, end, _ = pieces[j]
                grads[owner][start:end] += leaf_grad[b, : end - start].to(precision)
                losses[owner] += float(parts[b].detach())
    return [TextGradient(finite_norms(tensor_norms(g), plan.text), loss, plan.n_scored, plan.long_text)
            for g, loss, plan in zip(grads, losses, plans)]


def batched_param_norms(lm: LanguageModel, plans: Sequence[Plan], *, batch_tokens: int | None = None,
                        gradient_bytes: int | None = None) -> list[TextGradient]:
    """Per-sample parameter gradients of right-padded batches with `torch.func` (equal to `loop_param_norms`).

    Texts with several windows go through the loop. Which tensors receive a gradient comes from a
    two-token probe (`grad` returns zeros, not None, for the others).
    """
    out: list[TextGradient | None] = [None] * len(plans)
    rest = [i for i, plan in enumerate(plans) if len(plan.windows) == 1]
    looped = [i for i, plan in enumerate(plans) if len(plan.windows) > 1]
    for i, found in zip(looped, loop_param_norms(lm, [plans[i] for i in looped])):
        out[i] = found
    if rest:
        used = _used_tensors(lm, plans[rest[0]])
        per_sample = _max_batch(lm, gradient_bytes)
        budget = batch_tokens or (CUDA_BATCH_TOKENS if lm.device.type == "cuda" else CPU_BATCH_TOKENS)
        for batch in pack_lengths([len(plans[i].ids) for i in rest], budget):
            for a in range(0, len(batch), per_sample):
                chunk = [plans[rest[j]] for j in batch[a : a + per_sample]]
                for j, found in zip(batch[a : a + per_sample], _vmap_chunk(lm, chunk, used)):
                    out[rest[j]] = found
    return out  # type: ignore[return-value]


def _vmap_chunk(lm: LanguageModel, plans: Sequence[Plan], used: list[bool]) -> list[TextGradient]:
    """One vmapped forward/backward of a chunk; halved on a CUDA out-of-memory error, looped where vmap fails."""
    try:
        return _vmap_norms(lm, plans, used)
    except torch.cuda.OutOfMemoryError:
        if len(plans) == 1:
            raise
        torch.cuda.empty_cache()
        half = len(plans) // 2
        return _vmap_chunk(lm, plans[:half], used) + _vmap_chunk(lm, plans[half:], used)
    except (RuntimeError, NotImplementedError) as err:  # e.g. data-dependent control flow in the model's code
        warnings.warn(f"per-sample gradients (torch.func) failed on this model ({str(err)[:200]}); "
                      "one backward per text instead", RuntimeWarning, stacklevel=2)
        return loop_param_norms(lm, plans)


def _vmap_norms(lm: LanguageModel, plans: Sequence[Plan], used: list[bool]) -> list[TextGradient]:
    """Per-sample gradients of L_s for every text of a chunk at once: (b, *shape) per tensor."""
    model, precision = lm.model, stats_dtype(lm.dtype)
    named = unique_parameters(model)
    values = {name: p.detach() for name, p in named}
    ids, mask = pad_right([plan.ids for plan in plans], lm.pad_id)
    # weights (b, W−1): 1/n on the rows that predict a scored token, 0 on padding
    weights = mask[:, 1:].to(precision) / torch.tensor([plan.n_scored for plan in plans], dtype=precision)[:, None]
    ids, weights = ids.to(lm.device), weights.to(lm.device)

    def loss_of(params: dict, row: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, params, args=(), kwargs={"input_ids": row[None], "use_cache": False}).logits[0]
        logp = torch.log_softmax(logits[:-1].to(precision), dim=-1)  # (W−1, vocab)
        return -(logp.gather(-1, row[1:, None])[:, 0] * w).sum()

    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(False), torch.enable_grad(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*batching rule.*")  # a per-sample fallback: slower, same values
            grads, losses = vmap(grad_and_value(loss_of), in_dims=(None, 0, 0))(values, ids, weights)
        norms = torch.stack([tensor_norms(grads[name].reshape(len(plans), -1))
                             for (name, _), keep in zip(named, used) if keep], dim=1)  # (b, tensors, 3)
    finally:
        model.train(was_training)
    return [TextGradient(finite_norms(norms[b], plan.text), float(losses[b]), plan.n_scored, plan.long_text)
            for b, plan in enumerate(plans)]


def _used_tensors(lm: LanguageModel, plan: Plan) -> list[bool]:
    """Which unique parameter tensors receive a gradient from a text's loss (not None in `autograd.grad`)."""
    params = [p for _, p in unique_parameters(lm.model)]
    with gradients_on(lm.model):
        ids = torch.tensor(plan.ids[:2], device=lm.device)
        grads = torch.autograd.grad(window_loss(lm, ids, 1, 1), params, allow_unused=True)
    return [g is not None for g in grads]


def _max_batch(lm: LanguageModel, gradient_bytes: int | None) -> int:
    """Texts per vmap chunk: per-sample gradients of that many fit in the gradient budget."""
    per_sample = sum(p.numel() * p.element_size() for _, p in unique_parameters(lm.model))
    if gradient_bytes is None:
        if lm.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(lm.device)
            gradient_bytes = int(free * CUDA_GRADIENT_SHARE)
        else:
            gradient_bytes = CPU_GRADIENT_BYTES
    return max(1, gradient_bytes // per_sample)


def vmap_suits(lm: LanguageModel) -> bool:
    """Whether batched=None takes the per-sample path for parameters: a small model without routed experts."""
    if any(getattr(lm.model.config, name, None) for name in ROUTED_EXPERTS):
        return False
    n_params = sum(p.numel() for _, p in unique_parameters(lm.model))
    return n_params <= VMAP_MAX_PARAMS and _max_batch(lm, None) >= 2

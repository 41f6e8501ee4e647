"""GDS features: LoRA gradients of one text described by eight statistics per matrix (Zhang et al. 2026, §4).

Per text: attach fresh LoRA adapters (r = 16, α = 32, dropout 0, seeded A, B = 0) to every attention
and FFN projection, run the causal-LM loss (the text's mean token NLL, boundary token first as in
`LanguageModel.token_stats`) forward and backward without any optimizer step, and describe each
LoRA-B gradient G (r × h) by eight statistics (`matrix_features`). A supervised MLP on a labelled
split maps the feature vector to a member probability (`GdsClassifier`, saved without pickle).

Two equal ways to get the gradients: `features_loop` (one backward per text, the paper's way; the
test oracle) and `gradient_features` (one backward per batch; per-sample G[s] = Σ_t a[s,t]ᵀ g[s,t]
from each LoRA-B layer's input a and output gradient g, padding masked out; the LoRA branch itself,
exactly zero while B = 0, is skipped). Choices the paper leaves open: the top-10% set has
max(1, floor(0.1·r·h)) entries, ties to the lower position (as a stable sort); Std and Row_Mean_Std are population deviations (Eq. 13–14); a 10p_Ratio
of an all-zero G is 0 (the authors' code maps NaN features to 0); texts longer than
`max_tokens` (or the context) are truncated, as the paper's fixed tokenizer length.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ...model.forward import HEAD_CHUNK_ROWS, Segment, pack_batches, pad_right, plain_head, stats_head
from ...model.language_model import LanguageModel
from ...model.lora import LORA_TARGETS
from ...model.reduce import stats_dtype
from .settings import GdsSettings

#: The eight features of one gradient matrix, in the order docs/methods.md lists them.
FEATURES = ("abs_mean", "row_mean_max", "row_ecc", "col_ecc", "top10_ratio", "sparsity", "std", "row_mean_std")
TOP_FRACTION = 0.1
SPARSE_BELOW = 1e-6
#: Padded tokens per backward batch; on CPU larger batches are no faster (bench/gds.py) and hold more activations.
CPU_BATCH_TOKENS = 1024
CUDA_BATCH_TOKENS = 16384

Progress = Callable[[int, int], None]


def matrix_features(grad: torch.Tensor) -> torch.Tensor:
    """(..., r, h) LoRA-B gradients → (..., 8) features in `FEATURES` order, float64 (paper Eq. 7–14).

    With A = |G|, rows i = 1..r, columns j = 1..h, S = the top-10% entries of A:
    abs_mean     = mean of A (Eq. 7), the overall update strength.
    row_mean_max = max_i of the row means (1/h)Σ_j A_ij (Eq. 8).
    row_ecc      = mean over S of |2i − (r+1)| / (r−1) (Eq. 9): 0 at the centre row, 1 at the edges.
    col_ecc      = mean over S of |2j − (h+1)| / (h−1) (Eq. 10).
    top10_ratio  = Σ_S A_ij / Σ A (Eq. 11), the share of the largest entries.
    sparsity     = fraction of entries with A_ij < 1e-6 (Eq. 12).
    std          = population standard deviation of A (Eq. 13).
    row_mean_std = population standard deviation of the r row means (Eq. 14).
    """
    mag = grad.detach().double().abs()  # (..., r, h)
    r, h = mag.shape[-2:]
    flat = mag.flatten(-2)  # (..., r·h)
    row_means = mag.mean(-1)  # (..., r)
    top = top_mask(flat, max(1, int(flat.shape[-1] * TOP_FRACTION))).double()  # (..., r·h), 1 on S
    n_top = top.sum(-1)
    # offsets of each entry's row and column from the centre: |2i − (r+1)| / (r−1) with 1-based i
    row_off = ((2 * torch.arange(r, dtype=torch.float64) - (r - 1)).abs() / (r - 1)).repeat_interleave(h)
    col_off = ((2 * torch.arange(h, dtype=torch.float64) - (h - 1)).abs() / (h - 1)).repeat(r)
    total = flat.sum(-1)
    top_sum = (flat * top).sum(-1)
    ratio = torch.where(total > 0, top_sum / total.clamp_min(torch.finfo(total.dtype).tiny), 0.0)
    return torch.stack([
        flat.mean(-1),
        row_means.amax(-1),
        top @ row_off.to(top.device) / n_top,
        top @ col_off.to(top.device) / n_top,
        ratio,
        (flat < SPARSE_BELOW).double().mean(-1),
        flat.std(-1, correction=0),
        row_means.std(-1, correction=0),
    ], dim=-1)


def top_mask(values: torch.Tensor, k: int) -> torch.Tensor:
    """(..., n) → bool mask of the k largest values along the last axis; ties go to the lowest index.

    The same set as the first k of a stable descending sort, from a partial selection (twice as fast).
    """
    kth = values.topk(k, dim=-1, sorted=False).values.amin(-1, keepdim=True)  # (..., 1) the k-th largest
    above, tied = values > kth, values == kth
    room = k - above.sum(-1, keepdim=True)  # tied entries that still fit, taken in index order
    return above | (tied & (tied.cumsum(-1) <= room))


def lora_targets(model: nn.Module) -> list[str]:
    """Attention q/k/v/o and FFN gate/up/down (or the architecture's equivalents) of this model."""
    model_type = model.config.model_type
    if model_type not in LORA_TARGETS:
        raise ValueError(f"GDS has no LoRA target modules for architecture {model_type!r}; "
                         f"supported: {', '.join(sorted(LORA_TARGETS))}")
    return LORA_TARGETS[model_type]


def matrix_names(model: nn.Module) -> list[str]:
    """Names of the modules that get a LoRA adapter, in module order (one gradient matrix each)."""
    from transformers.pytorch_utils import Conv1D

    targets = set(lora_targets(model))
    return [n for n, m in model.named_modules() if n.split(".")[-1] in targets and isinstance(m, (nn.Linear, Conv1D))]


def feature_names(model: nn.Module) -> list[str]:
    """`module.feature` for every feature of every gradient matrix, in feature-vector order."""
    return [f"{name}.{feat}" for name in matrix_names(model) for feat in FEATURES]


@contextmanager
def lora_attached(model: nn.Module, settings: GdsSettings) -> Iterator[list[nn.Module]]:
    """Wrap `model` in place with fresh LoRA adapters; yields the wrapped layers in `matrix_names` order.

    Afterwards the adapters are unloaded (never merged): the same module tree, bit-identical weights,
    and every parameter's `requires_grad` and the train/eval mode restored.
    """
    from peft import LoraConfig, get_peft_model

    if hasattr(model, "peft_config"):
        raise ValueError("GDS needs a plain model, not one that already carries peft adapters")
    names = matrix_names(model)
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    was_training = model.training
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=0.0, bias="none",
                        target_modules=lora_targets(model), fan_in_fan_out=model.config.model_type == "gpt2")
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():  # seeded A, caller's RNG untouched
        warnings.simplefilter("ignore", FutureWarning)  # transformers' deprecation notes inside peft
        torch.manual_seed(settings.seed)
        peft_model = get_peft_model(model, config)
    try:
        model.eval()  # no dropout in the base model either
        wrapped = dict(model.named_modules())
        layers = [wrapped[n] for n in names]
        if not all(hasattr(m, "lora_B") for m in layers) or len(layers) != sum(
                hasattr(m, "lora_B") for m in wrapped.values()):
            raise RuntimeError("peft wrapped other modules than GDS expects")
        if next(model.parameters()).dtype == torch.float64:  # exactness checks: the same A values, in float64
            for module in layers:
                module.lora_A.to(torch.float64)
                module.lora_B.to(torch.float64)
        yield layers
    finally:
        peft_model.unload()
        for name, p in model.named_parameters():
            p.requires_grad_(flags[name])
        model.train(was_training)


def encode(lm: LanguageModel, texts: Sequence[str], settings: GdsSettings) -> list[list[int]]:
    """Token ids fed for each text: boundary token first under bos="auto" (as the core), truncated."""
    limit = min(settings.max_tokens, lm.max_length)
    out = []
    for i, text in enumerate(texts):
        ids = lm._with_boundary(lm._encode(str(text))[0], settings.bos)
        if len(ids) < 2:
            raise ValueError(f"text {i}: no token to score (empty text, or one token with bos='none')")
        out.append(ids[:limit])
    return out


def features_loop(lm: LanguageModel, texts: Sequence[str], settings: GdsSettings = GdsSettings()) -> np.ndarray:
    """(n_texts, n_matrices·8) features, one forward/backward per text (the reference; slow)."""
    seqs = encode(lm, texts, settings)
    rows = []
    with lora_attached(lm.model, settings) as wrappers, torch.enable_grad():
        layers = [m.lora_B["default"] for m in wrappers]
        for ids in seqs:
            input_ids = torch.tensor([ids], device=lm.device)
            logits = lm.model(input_ids=input_ids, use_cache=False).logits[0]
            logits = logits.to(stats_dtype(logits.dtype))  # (T, vocab), float32 at least
            loss = F.cross_entropy(logits[:-1], input_ids[0, 1:])  # mean NLL of the scored tokens
            for layer in layers:
                layer.weight.grad = None
            loss.backward()
            rows.append(torch.cat([matrix_features(layer.weight.grad.T) for layer in layers]))  # G = (r, h)
    return torch.stack(rows).cpu().numpy() if rows else np.empty((0, 0))


def gradient_features(lm: LanguageModel, texts: Sequence[str], settings: GdsSettings = GdsSettings(), *,
                      batch_tokens: int | None = None, progress: Progress | None = None) -> np.ndarray:
    """(n_texts, n_matrices·8) features from one backward per batch (equal to `features_loop`).

    B = 0, so the LoRA branch adds exactly zero to every output and to every input gradient: it is
    switched off (peft's `disable_adapters`), and each wrapped layer's hooks take the LoRA-B input
    a = lora_A(x) and the LoRA-B output gradient scaling · dL/dY. Same values, without the branch's
    zero products (thin matrix products are slow on CPU).
    """
    seqs = encode(lm, texts, settings)
    segments = [Segment(i, ids, 1) for i, ids in enumerate(seqs)]
    budget = batch_tokens or (CUDA_BATCH_TOKENS if lm.device.type == "cuda" else CPU_BATCH_TOKENS)
    out: np.ndarray | None = None
    total, done = sum(map(len, seqs)), 0
    with lora_attached(lm.model, settings) as wrappers, torch.enable_grad():
        for module in wrappers:
            module.enable_adapters(False)  # the branch is zero: skip it (the adapters are unloaded afterwards)
        for batch in pack_batches(segments, budget):
            feats = _split_on_oom(lm, wrappers, [seqs[i] for i in batch])  # (b, n_matrices, 8)
            if out is None:
                out = np.empty((len(seqs), feats.shape[1] * feats.shape[2]))
            out[batch] = feats.reshape(len(batch), -1).numpy()
            done += sum(len(seqs[i]) for i in batch)
            if progress is not None:
                progress(done, total)
    return out if out is not None else np.empty((0, 0))


def _split_on_oom(lm: LanguageModel, wrappers: list[nn.Module], seqs: list[list[int]]) -> torch.Tensor:
    """`_batch_features`, halving the batch on a CUDA out-of-memory error."""
    try:
        return _batch_features(lm, wrappers, seqs)
    except torch.cuda.OutOfMemoryError:
        if len(seqs) == 1:
            raise
        torch.cuda.empty_cache()
        half = len(seqs) // 2
        return torch.cat([_split_on_oom(lm, wrappers, seqs[:half]), _split_on_oom(lm, wrappers, seqs[half:])])


def _batch_features(lm: LanguageModel, wrappers: list[nn.Module], seqs: list[list[int]]) -> torch.Tensor:
    """One forward/backward of Σ_s mean-NLL_s over a right-padded batch; features per sample."""
    device = lm.device
    ids, mask = pad_right(seqs)
    width = ids.shape[1]
    ids, mask = ids.to(device), mask.to(device)
    # logits at t−1 predict token t; each text's rows are weighted 1/n_s so the sum is Σ_s mean-NLL_s
    rows = torch.cat([torch.arange(len(s) - 1) + b * width for b, s in enumerate(seqs)]).to(device)
    targets = torch.cat([torch.tensor(s[1:]) for s in seqs]).to(device)
    precision = stats_dtype(lm.dtype)  # of the head, its loss and the per-text weights
    weights = torch.cat([torch.full((len(s) - 1,), 1.0 / (len(s) - 1), dtype=precision) for s in seqs]).to(device)
    feats: list[torch.Tensor | None] = [None] * len(wrappers)
    leaf: list[torch.Tensor] = []

    def embedding_leaf(module, inputs, output):  # base weights are frozen: the graph starts here
        leaf.append(output.detach().requires_grad_())
        return leaf[-1]

    def capture(i: int):
        def forward_hook(module, inputs, output):
            lora_a = module.lora_A["default"]
            with torch.no_grad():  # a = the LoRA-B input: (b, T, r), padding excluded
                a = lora_a(inputs[0].to(lora_a.weight.dtype)) * mask[..., None].to(lora_a.weight.dtype)
            scaling = module.scaling["default"]

            def grad_hook(g):  # dL/d(LoRA-B output) = scaling · dL/dY: (b, T, h)
                grad_b = torch.einsum("btr,bth->brh", a.to(precision), g.to(precision)) * scaling  # G[s]: (b, r, h)
                feats[i] = matrix_features(grad_b)

            output.register_hook(grad_hook)
        return forward_hook

    handles = [m.register_forward_hook(capture(i)) for i, m in enumerate(wrappers)]
    handles.append(lm.model.get_input_embeddings().register_forward_hook(embedding_leaf))
    try:
        split = plain_head(lm.model)
        if split is not None:  # float32 head on the scored rows, its gradient formed chunk-wise
            backbone, head = split
            hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=False)[0]  # (b, T, H)
            flat = hidden.reshape(-1, hidden.shape[-1])[rows]  # (rows, H)
            grad_flat = _head_gradient(flat.detach(), head, targets, weights)
            torch.autograd.grad(flat, leaf, grad_outputs=grad_flat.to(flat.dtype))  # fires the hooks
        else:
            full = lm.model(input_ids=ids, attention_mask=mask, use_cache=False).logits  # (b, T, vocab)
            logits = full.reshape(-1, full.shape[-1])[rows].to(stats_dtype(full.dtype))
            loss = (F.cross_entropy(logits, targets, reduction="none") * weights).sum()
            torch.autograd.grad(loss, leaf)  # fires the hooks; no .grad is kept anywhere
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(feats, dim=1).cpu()  # (b, n_matrices, 8)


@torch.no_grad()
def _head_gradient(flat: torch.Tensor, head: nn.Linear, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """dL/d(hidden rows) of L = Σ_rows weight · NLL under a float32 head: (softmax − onehot) · weight @ W.

    Chunks of rows, so no (rows, vocab) tensor is kept for autograd.
    """
    w, bias = stats_head(head)  # (vocab, H), float32 at least
    out = torch.empty(flat.shape, dtype=w.dtype, device=flat.device)  # (rows, H)
    for a in range(0, flat.shape[0], HEAD_CHUNK_ROWS):
        b = min(a + HEAD_CHUNK_ROWS, flat.shape[0])
        p = torch.softmax(F.linear(flat[a:b].to(w.dtype), w, bias), dim=-1)  # (chunk, vocab)
        p[torch.arange(b - a, device=p.device), targets[a:b]] -= 1.0
        out[a:b] = (p * weights[a:b, None]) @ w
    return out

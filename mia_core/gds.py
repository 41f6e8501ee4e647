"""GDS, Gradient Deviation Scores (Zhang et al. 2026, arXiv:2603.04828, §4; METHODS.md "gds").

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

import json
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .demo_train import LORA_TARGETS
from .forward import HEAD_CHUNK_ROWS, Segment, pack_batches, pad_right, plain_head, stats_head
from .identity import text_sha256
from .token_stats import stats_dtype

#: The eight features of one gradient matrix, in the order METHODS.md lists them.
FEATURES = ("abs_mean", "row_mean_max", "row_ecc", "col_ecc", "top10_ratio", "sparsity", "std", "row_mean_std")
TOP_FRACTION = 0.1
SPARSE_BELOW = 1e-6
#: Padded tokens per backward batch; on CPU larger batches are no faster (bench/gds.py) and hold more activations.
CPU_BATCH_TOKENS = 1024
CUDA_BATCH_TOKENS = 16384

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class GdsSettings:
    """What the features depend on besides the model (saved with a classifier, checked on load)."""

    r: int = 16
    """LoRA rank: rows of each gradient matrix."""
    alpha: int = 32
    """LoRA scaling numerator (scale = alpha / r); it multiplies every gradient."""
    seed: int = 0
    """Seed of the random LoRA A matrices (the caller's RNG state is left untouched)."""
    max_tokens: int = 512
    """Tokens per text, boundary token included (the paper: 512; 256 for WikiMIA)."""
    bos: str = "auto"
    """BOS policy as in `LanguageModel.token_stats`: "auto" prepends the document-boundary token."""

    def __post_init__(self) -> None:
        if self.r < 2 or self.alpha <= 0 or self.max_tokens < 2 or self.bos not in ("auto", "none"):
            raise ValueError(f"GDS needs r >= 2, alpha > 0, max_tokens >= 2, bos auto|none (got {self})")


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


def encode(lm, texts: Sequence[str], settings: GdsSettings) -> list[list[int]]:
    """Token ids fed for each text: boundary token first under bos="auto" (as the core), truncated."""
    limit = min(settings.max_tokens, lm.max_length)
    out = []
    for i, text in enumerate(texts):
        ids = lm._with_boundary(lm._encode(str(text))[0], settings.bos)
        if len(ids) < 2:
            raise ValueError(f"text {i}: no token to score (empty text, or one token with bos='none')")
        out.append(ids[:limit])
    return out


def features_loop(lm, texts: Sequence[str], settings: GdsSettings = GdsSettings()) -> np.ndarray:
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


def gradient_features(lm, texts: Sequence[str], settings: GdsSettings = GdsSettings(), *,
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


def _split_on_oom(lm, wrappers: list[nn.Module], seqs: list[list[int]]) -> torch.Tensor:
    """`_batch_features`, halving the batch on a CUDA out-of-memory error."""
    try:
        return _batch_features(lm, wrappers, seqs)
    except torch.cuda.OutOfMemoryError:
        if len(seqs) == 1:
            raise
        torch.cuda.empty_cache()
        half = len(seqs) // 2
        return torch.cat([_split_on_oom(lm, wrappers, seqs[:half]), _split_on_oom(lm, wrappers, seqs[half:])])


def _batch_features(lm, wrappers: list[nn.Module], seqs: list[list[int]]) -> torch.Tensor:
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


# ---------------------------------------------------------------- the supervised classifier (paper §4.4, App. A.6)

#: Hidden layers of the MLP (the paper's 128, 64); Adam, lr 1e-3, early stopping.
MLP_HIDDEN = (128, 64)
#: sklearn's early stopping holds out 10% of the training rows, stratified: it needs a few of each class.
MIN_TRAIN_PER_CLASS = 6
FORMAT = "mia-lens-gds-classifier/1"


def check_labels(labels) -> np.ndarray:
    """0/1 labels (1 = member) with both classes present, as int64."""
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0 or not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be a non-empty list of 0/1 (1 = member)")
    y = y.astype(np.int64)
    if y.min() == y.max():
        raise ValueError("GDS is supervised: the labelled data needs both members (1) and non-members (0)")
    return y


def stratified_split(labels, *, train_fraction: float = 0.3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split into (train rows, test rows), each sorted (the paper: 30% / 70%)."""
    from sklearn.model_selection import train_test_split

    if not 0 < train_fraction < 1:
        raise ValueError(f"train fraction must be in (0, 1) (got {train_fraction})")
    y = check_labels(labels)
    train, test = train_test_split(np.arange(y.size), train_size=train_fraction, stratify=y, random_state=seed)
    n_pos = int(y[train].sum())
    if min(n_pos, train.size - n_pos) < MIN_TRAIN_PER_CLASS:
        raise ValueError(f"the training split has {n_pos} members and {train.size - n_pos} non-members; GDS needs at "
                         f"least {MIN_TRAIN_PER_CLASS} of each (use more texts or a larger train fraction)")
    return np.sort(train), np.sort(test)


def fit_mlp(features: np.ndarray, labels, *, seed: int = 0):
    """The paper's classifier: StandardScaler + MLPClassifier(128, 64), Adam lr 1e-3, early stopping."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    mlp = MLPClassifier(hidden_layer_sizes=MLP_HIDDEN, solver="adam", learning_rate_init=1e-3,
                        early_stopping=True, random_state=seed)
    pipe = Pipeline([("scale", StandardScaler()), ("mlp", mlp)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return pipe.fit(np.asarray(features, dtype=np.float64), check_labels(labels))


@dataclass(frozen=True)
class GdsClassifier:
    """A fitted GDS MLP as plain arrays (standardiser, ReLU layers, logistic output) and its spec.

    spec : JSON-able: model name and fingerprint, LoRA settings, feature names, MLP settings, and the
        split it learned from (fraction, seed, counts, ids of the training rows).
    """

    spec: dict
    mean: np.ndarray
    scale: np.ndarray
    coefs: tuple[np.ndarray, ...]
    intercepts: tuple[np.ndarray, ...]
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # (model, dtype, text) → log-odds

    @classmethod
    def from_pipeline(cls, pipe, spec: dict) -> "GdsClassifier":
        scaler, mlp = pipe[0], pipe[-1]
        if list(mlp.classes_) != [0, 1] or mlp.out_activation_ != "logistic":
            raise ValueError("expected a binary MLP on 0/1 labels")
        return cls(spec, scaler.mean_.copy(), scaler.scale_.copy(), tuple(c.copy() for c in mlp.coefs_),
                   tuple(b.copy() for b in mlp.intercepts_))

    @property
    def settings(self) -> GdsSettings:
        return GdsSettings(**self.spec["lora"])

    @property
    def feature_names(self) -> list[str]:
        return list(self.spec["feature_names"])

    def log_odds(self, features: np.ndarray) -> np.ndarray:
        """(n, n_features) → (n,) member log-odds (the MLP's output before the logistic)."""
        h = (np.asarray(features, dtype=np.float64) - self.mean) / self.scale
        for w, b in zip(self.coefs[:-1], self.intercepts[:-1]):
            h = np.maximum(h @ w + b, 0.0)
        return (h @ self.coefs[-1] + self.intercepts[-1])[:, 0]

    def predict_proba(self, features: np.ndarray) -> np.ndarray:
        """(n,) member probabilities (= sklearn's `predict_proba(X)[:, 1]`)."""
        from scipy.special import expit

        return expit(self.log_odds(features))

    def describe(self) -> str:
        """One line for reports: supervised, and which split it learned from."""
        s = self.spec["split"]
        return (f"supervised: MLP trained on {s['n_train']} labelled texts ({s['train_members']} members, "
                f"{s['train_nonmembers']} non-members) = {s['train_fraction']:.0%} of {s['source'] or 'the data'}, "
                f"stratified, seed {s['seed']}")

    def trained_on(self, text: str) -> bool:
        """True when the text was one of the classifier's training rows (its score there is not a test)."""
        return text_sha256(str(text)) in set(self.spec["split"].get("train_sha256", []))

    def check(self, lm, settings: GdsSettings | None = None) -> None:
        """ValueError unless this classifier's feature spec matches the model (and the settings given)."""
        model = self.spec["model"]
        if model["fingerprint"] != lm.fingerprint:
            raise ValueError(f"this GDS classifier was fitted on model {model['name']!r} (fingerprint "
                             f"{model['fingerprint']}), not on {lm.name!r} (fingerprint {lm.fingerprint}); "
                             "gradient features differ between models: fit one for this model (mia gds fit)")
        if settings is not None and settings != self.settings:
            raise ValueError(f"this GDS classifier was fitted with LoRA settings {self.settings}, not {settings}")
        if feature_names(lm.model) != self.feature_names:
            raise ValueError("this GDS classifier's feature names (LoRA target modules) do not match the model's")

    def score_texts(self, lm, texts: Sequence[str], *, batch_tokens: int | None = None,
                    progress: Progress | None = None) -> np.ndarray:
        """(n,) member log-odds of texts (higher = member); features batched, remembered per text."""
        self.check(lm)
        key = (lm.fingerprint, str(lm.dtype))
        todo = [t for t in dict.fromkeys(map(str, texts)) if (*key, t) not in self.memo]
        if todo:
            values = self.log_odds(gradient_features(lm, todo, self.settings, batch_tokens=batch_tokens, progress=progress))
            self.memo.update({(*key, t): float(v) for t, v in zip(todo, values)})
        return np.array([self.memo[(*key, str(t))] for t in texts], dtype=np.float64)

    def save(self, folder: str | Path) -> Path:
        """`spec.json` + `mlp.npz` (plain arrays, no pickle) in `folder` (created; its parent must exist)."""
        folder = Path(folder)
        folder.mkdir(exist_ok=True)
        arrays = {"mean": self.mean, "scale": self.scale}
        arrays.update({f"coef_{i}": c for i, c in enumerate(self.coefs)})
        arrays.update({f"intercept_{i}": b for i, b in enumerate(self.intercepts)})
        np.savez(folder / "mlp.npz", **arrays)
        (folder / "spec.json").write_text(json.dumps(self.spec, indent=1))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "GdsClassifier":
        """Rebuild a saved classifier (`allow_pickle=False`); shapes are checked against the spec."""
        folder = Path(folder)
        if not (folder / "spec.json").is_file() or not (folder / "mlp.npz").is_file():
            raise FileNotFoundError(f"no GDS classifier in {folder} (expected spec.json and mlp.npz; see: mia gds fit)")
        spec = json.loads((folder / "spec.json").read_text())
        if spec.get("format") != FORMAT:
            raise ValueError(f"{folder / 'spec.json'} is not a GDS classifier spec ({FORMAT})")
        n_layers = len(spec["mlp"]["hidden"]) + 1
        with np.load(folder / "mlp.npz", allow_pickle=False) as z:
            mean, scale = z["mean"], z["scale"]
            coefs = tuple(z[f"coef_{i}"] for i in range(n_layers))
            intercepts = tuple(z[f"intercept_{i}"] for i in range(n_layers))
        widths = [len(spec["feature_names"])] + list(spec["mlp"]["hidden"]) + [1]
        if mean.shape != scale.shape or mean.shape != (widths[0],) or any(
                c.shape != (a, b) or i.shape != (b,) for c, i, a, b in zip(coefs, intercepts, widths, widths[1:])):
            raise ValueError(f"{folder / 'mlp.npz'} does not match the shapes in its spec.json")
        return cls(spec, mean, scale, coefs, intercepts)


def as_classifier(classifier) -> GdsClassifier:
    """A `GdsClassifier`, or one loaded from a folder path (loaded once per folder and modification time)."""
    if isinstance(classifier, GdsClassifier):
        return classifier
    if isinstance(classifier, (str, Path)):
        folder = Path(classifier).resolve()
        spec = folder / "spec.json"
        return _load_cached(str(folder), spec.stat().st_mtime_ns if spec.exists() else 0)
    raise TypeError(f"classifier must be a GdsClassifier or its folder (got {type(classifier).__name__})")


@lru_cache(maxsize=8)
def _load_cached(folder: str, mtime_ns: int) -> GdsClassifier:
    return GdsClassifier.load(folder)


def fit_classifier(features: np.ndarray, labels, lm, *, settings: GdsSettings, seed: int, split: dict) -> GdsClassifier:
    """Fit the MLP on feature rows and record what it learned from (`split`) in its spec."""
    pipe = fit_mlp(features, labels, seed=seed)
    spec = {
        "format": FORMAT, "method": "gds", "supervised": True,
        "model": {"name": lm.name, "fingerprint": lm.fingerprint, "dtype": str(lm.dtype)},
        "lora": asdict(settings), "features_per_matrix": list(FEATURES), "feature_names": feature_names(lm.model),
        "mlp": {"hidden": list(MLP_HIDDEN), "solver": "adam", "learning_rate_init": 1e-3, "early_stopping": True,
                "seed": seed, "n_iter": int(pipe[-1].n_iter_)},
        "split": split, "versions": _versions("torch", "peft", "transformers", "scikit-learn"),
    }
    return GdsClassifier.from_pipeline(pipe, spec)


def split_record(y: np.ndarray, train: np.ndarray, test: np.ndarray, ids, *, train_fraction: float, seed: int,
                 source: str, texts: Sequence[str] | None = None) -> dict:
    """What the classifier learned from: fraction, seed, counts per class, ids (and text hashes) of the training rows."""
    ids = list(range(y.size)) if ids is None else list(ids)
    return {"source": source, "train_fraction": train_fraction, "seed": seed, "stratified": True,
            "n_total": int(y.size), "n_train": int(train.size), "n_test": int(test.size),
            "train_members": int(y[train].sum()), "train_nonmembers": int(train.size - y[train].sum()),
            "test_members": int(y[test].sum()), "test_nonmembers": int(test.size - y[test].sum()),
            "train_ids": [_plain(ids[i]) for i in train],
            "train_sha256": [text_sha256(str(texts[i])) for i in train] if texts is not None else []}


def fit_texts(lm, texts: Sequence[str], labels, *, ids=None, settings: GdsSettings = GdsSettings(),
              train_fraction: float = 0.3, seed: int = 0, source: str = "", batch_tokens: int | None = None,
              progress: Progress | None = None) -> GdsClassifier:
    """Split labelled texts (stratified, seeded), compute features of the training rows, fit the MLP."""
    y = check_labels(labels)
    train, test = stratified_split(y, train_fraction=train_fraction, seed=seed)
    features = gradient_features(lm, [texts[i] for i in train], settings, batch_tokens=batch_tokens, progress=progress)
    split = split_record(y, train, test, ids, train_fraction=train_fraction, seed=seed, source=source, texts=texts)
    return fit_classifier(features, y[train], lm, settings=settings, seed=seed, split=split)


@dataclass(frozen=True)
class GdsEvaluation:
    """GDS fitted on the training rows and evaluated on the held-out rows."""

    classifier: GdsClassifier
    train_idx: np.ndarray
    test_idx: np.ndarray
    test_scores: np.ndarray
    """Member log-odds of the test rows (higher = member)."""
    report: dict
    """`metrics.evaluate` on the test rows, plus "split" (what the classifier learned from)."""


def evaluate_texts(lm, texts: Sequence[str], labels, *, ids=None, settings: GdsSettings = GdsSettings(),
                   train_fraction: float = 0.3, seed: int = 0, n_boot: int = 1000, source: str = "",
                   batch_tokens: int | None = None, progress: Progress | None = None) -> GdsEvaluation:
    """Features of every text, MLP fitted on a seeded stratified split, AUROC with bootstrap CI on the rest."""
    from . import metrics

    y = check_labels(labels)
    train, test = stratified_split(y, train_fraction=train_fraction, seed=seed)
    texts = [str(t) for t in texts]
    features = gradient_features(lm, texts, settings, batch_tokens=batch_tokens, progress=progress)
    split = split_record(y, train, test, ids, train_fraction=train_fraction, seed=seed, source=source, texts=texts)
    clf = fit_classifier(features[train], y[train], lm, settings=settings, seed=seed, split=split)
    scores = clf.log_odds(features)
    clf.memo.update({(lm.fingerprint, str(lm.dtype), t): float(v) for t, v in zip(texts, scores)})
    with warnings.catch_warnings():  # kept in the report instead
        warnings.simplefilter("ignore", UserWarning)
        report = metrics.evaluate(y[test], scores[test], n_boot=n_boot, seed=seed)
    report["split"] = {k: v for k, v in split.items() if k not in ("train_ids", "train_sha256")}
    report["supervised"] = clf.describe()
    return GdsEvaluation(clf, train, test, scores[test], report)


def _plain(value):
    """numpy scalars → Python values (for JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def _versions(*packages: str) -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in packages}

"""Probe's linear step: standardize, then one no-bias logistic probe per layer (Liu et al. 2024, steps 4–6).

`train_probes` runs the authors' `run_probe.py` optimisation for all layers at once: σ(wᵀh) without bias,
full-batch mean BCE, AdamW (lr 1e-3, weight decay 0.1), 1000 epochs, w starting at 0 (deterministic; the authors'
`nn.Linear` starts at random, unconfirmed to matter). Summing the layers' losses leaves each layer's gradient its
own and AdamW is elementwise, so this equals one optimisation per layer. float64 throughout.
"""
from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

EPOCHS = 1000
PROBE_LR = 1e-3
WEIGHT_DECAY = 0.1


def standardizer(features: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, L, d) → mean, std (population) and the kept dimensions (std > 0), each (L, d)."""
    x = np.asarray(features, dtype=np.float64)
    mean, std = x.mean(0), x.std(0)
    return mean, std, std > 0


def standardize(features: np.ndarray, mean: np.ndarray, std: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """(n, L, d) centred and divided by the std; dropped (zero-std) dimensions set to 0, so they weigh nothing."""
    z = (np.asarray(features, dtype=np.float64) - mean) / np.where(keep, std, 1.0)
    return np.where(keep, z, 0.0)


def train_probes(features: np.ndarray, labels: np.ndarray, *, epochs: int = EPOCHS, lr: float = PROBE_LR,
                 weight_decay: float = WEIGHT_DECAY) -> np.ndarray:
    """(n, L, d) standardized features, (n,) 0/1 labels → (L, d) probe weights, one per layer."""
    x = torch.as_tensor(np.asarray(features, dtype=np.float64)).transpose(0, 1)  # (L, n, d)
    y = torch.as_tensor(np.asarray(labels, dtype=np.float64)).expand(x.shape[0], -1)  # (L, n)
    w = torch.zeros(x.shape[0], x.shape[2], dtype=torch.float64, requires_grad=True)  # (L, d)
    opt = torch.optim.AdamW([w], lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        logits = torch.einsum("lnd,ld->ln", x, w)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none").mean(1).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w.detach().numpy()


def probe_logits(features: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(n, L, d) standardized features, (L, d) weights → (n, L) logits wᵀh (higher = member of the proxy)."""
    return np.einsum("nld,ld->nl", np.asarray(features, dtype=np.float64), weights)


def layer_aucs(logits: np.ndarray, labels: np.ndarray) -> list[float]:
    """(n, L) logits, (n,) 0/1 labels → each layer's AUROC."""
    return [float(roc_auc_score(labels, logits[:, layer])) for layer in range(logits.shape[1])]

"""Fitting Probe end to end (Liu et al. 2024, steps 1–6): D_aux → A/B → proxy → per-layer probes → the dev-best layer.

D_aux is the **non-members** among the fit's training rows (known non-members of the scored distribution); the
members there are not used (the method needs none). A and B are a seeded random half each; the probes learn from a
stratified 70% of A ∪ B and the layer is picked on the other 30% (the dev set), all on proxy features, so no target
labels choose anything. The target's standardizer is the mean and std of its own features on D_aux (non-transductive).
"""
from __future__ import annotations

import warnings
from dataclasses import asdict
from typing import Sequence

import numpy as np
from sklearn.model_selection import train_test_split

from ...model.language_model import LanguageModel
from ...version import package_versions
from .activations import PROMPT, Progress, last_token_features
from .fitted import FORMAT, ProbeFit
from .linear import EPOCHS, PROBE_LR, WEIGHT_DECAY, layer_aucs, probe_logits, standardize, standardizer, train_probes
from .proxy import proxy_model
from .settings import AUTHORS_AUX, DEV_FRACTION, MIN_AUX, ProbeSettings


def split_aux(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of D_aux → (A/B label per row: 1 for A, the first half of a seeded permutation; probe-train rows; dev rows)."""
    order = np.random.default_rng(seed).permutation(n)
    is_a = np.zeros(n, np.int64)
    is_a[order[: n // 2]] = 1
    train, dev = train_test_split(np.arange(n), test_size=DEV_FRACTION, stratify=is_a, random_state=seed)
    return is_a, np.sort(train), np.sort(dev)


def fit_probe(lm: LanguageModel, aux: Sequence[str], settings: ProbeSettings, *, seed: int, split: dict,
              source: str, progress: Progress | None = None) -> ProbeFit:
    """The probe fitted on the known non-members `aux` (D_aux), its record in its spec."""
    aux = [str(t) for t in aux]
    if len(aux) < MIN_AUX:
        raise ValueError(f"probe needs at least {MIN_AUX} known non-members to split into A and B and a dev set "
                         f"(got {len(aux)})")
    if len(aux) < AUTHORS_AUX:
        warnings.warn(f"probe: {len(aux)} known non-members (the authors use {AUTHORS_AUX}); the layer choice and the "
                      "probe are noisy", stacklevel=2)
    is_a, train, dev = split_aux(len(aux), seed)
    knobs = dict(max_tokens=settings.max_tokens, pad_id=lm.pad_id)
    proxy = proxy_model(lm.model, lm.tokenizer, [t for t, a in zip(aux, is_a) if a], lora_r=settings.lora_r,
                        lr=settings.lr, epochs=settings.epochs, batch_size=settings.batch_size, seed=seed,
                        progress=progress, **knobs)
    proxy_features = last_token_features(proxy, lm.tokenizer, aux, **knobs)  # (n_aux, L, d)
    del proxy
    mean, std, keep = standardizer(proxy_features[train])
    weights = train_probes(standardize(proxy_features[train], mean, std, keep), is_a[train])  # (L, d)
    dev_auc = layer_aucs(probe_logits(standardize(proxy_features[dev], mean, std, keep), weights), is_a[dev])
    layer = int(np.argmax(dev_auc))  # the first of equals
    target_features = last_token_features(lm.model, lm.tokenizer, aux, **knobs)
    t_mean, t_std, t_keep = standardizer(target_features[:, layer][:, None])
    spec = {
        "format": FORMAT, "method": "probe", "supervised": True,
        "model": {"name": lm.name, "fingerprint": lm.fingerprint, "dtype": str(lm.dtype)},
        "settings": asdict(settings), "prompt": PROMPT, "hidden_size": int(weights.shape[1]),
        "layer": layer, "dev_auc": dev_auc, "n_layers": int(weights.shape[0]),
        "probe": {"epochs": EPOCHS, "lr": PROBE_LR, "weight_decay": WEIGHT_DECAY, "bias": False, "init": "zeros",
                  "dev_fraction": DEV_FRACTION, "dev": "held-out A ∪ B on the proxy (no target labels)"},
        "aux": {"source": source, "n": len(aux), "n_a": int(is_a.sum()), "n_b": int(len(aux) - is_a.sum()),
                "n_probe_train": int(train.size), "n_dev": int(dev.size), "seed": seed,
                "kept_dimensions": int((t_keep[0] & keep[layer]).sum())},
        "deviations": ["LoRA proxy fine-tune" if settings.lora_r else "none (full fine-tuning)",
                       f"model dtype {lm.dtype} (the authors: bf16)", "layer picked on proxy dev features"],
        "split": split, "versions": package_versions("torch", "peft", "transformers", "scikit-learn"),
    }
    return ProbeFit(spec, weights[layer], t_mean[0], t_std[0], t_keep[0] & keep[layer])

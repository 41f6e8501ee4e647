"""The weights of a pickle checkpoint (`pytorch_model.bin`, or its shards), unpickled whole under `allow_pickle`.

transformers (5.x) reads `.bin` files with torch's `weights_only=True` whatever it is told, so a checkpoint that
holds anything besides tensors (a training step, numpy arrays, a whole pickled module) failed with "Weights only
load failed" even with `--allow-pickle`. Unpickling runs whatever code the file holds: only the explicit opt-in
reaches this module (`loading.check_weights` refuses pickle otherwise), and `load_model` warns first.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

CHECKPOINT = "pytorch_model.bin"
CHECKPOINT_INDEX = "pytorch_model.bin.index.json"


def load_pickled(folder: Path, dtype: torch.dtype):
    """(model, loading info) as `from_pretrained` gives them, from the folder's config and its unpickled tensors."""
    from transformers import AutoConfig  # transformers is imported when a model is loaded, not with mia_core
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    config = AutoConfig.from_pretrained(folder)
    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        raise ValueError(f"{folder}: pickle weights are loaded for built-in architectures only, not {config.model_type!r}")
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]  # a model name and a state dict cannot go together
    return model_class.from_pretrained(None, config=config, state_dict=pickle_state_dict(folder), dtype=dtype,
                                       output_loading_info=True)


def pickle_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    """The tensors of the folder's pickle checkpoint by name (non-tensor entries dropped), on the CPU."""
    if (folder / CHECKPOINT_INDEX).exists():
        files = sorted(set(json.loads((folder / CHECKPOINT_INDEX).read_text())["weight_map"].values()))
    elif (folder / CHECKPOINT).exists():
        files = [CHECKPOINT]
    else:
        raise ValueError(f"{folder}: no {CHECKPOINT} (or {CHECKPOINT_INDEX}) to load pickle weights from")
    weights: dict[str, torch.Tensor] = {}
    for name in files:
        weights.update(_tensors(torch.load(folder / name, map_location="cpu", weights_only=False), folder / name))
    return weights


def _tensors(loaded: object, path: Path) -> dict[str, torch.Tensor]:
    """The named tensors of what one file unpickled to: a mapping of names to values, or a whole module."""
    if isinstance(loaded, torch.nn.Module):
        loaded = loaded.state_dict()
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} holds a {type(loaded).__name__}, not a state dict or a model")
    return {str(k): v for k, v in loaded.items() if isinstance(v, torch.Tensor)}

"""Loading one model across several devices: accelerate's dispatch (`device_map="auto"`) under a memory cap.

A model is sharded when the caller caps memory per device (`max_memory`), or, under device "auto", when the host has
several CUDA GPUs and the weights do not fit the first one. accelerate then places whole layers device by device
(GPUs in order, then the CPU, then disk); parts left for disk are read from their safetensors files, or written to
an offload folder under the cache, removed with the model. The weights are the same files, so the model's
fingerprint (and every cache key) is the same as when it is loaded whole.
"""
from __future__ import annotations

import math
import shutil
import uuid
import weakref
from pathlib import Path

import torch

from ..paths import cache_root
from .memory_map import MemoryMap, parse_max_memory

#: A model is loaded on one GPU when its weights take at most this share of the GPU's free memory (the rest holds
#: activations and the logits chunks of the statistics pass).
FIT_SHARE = 0.8


def shard_memory(folder: Path, device: str, dtype: torch.dtype, max_memory: str | dict | None) -> MemoryMap | None:
    """The cap to shard the model under ({}: accelerate's default, every device's free memory), or None: load it
    whole on one device. Raises ValueError for a cap that cannot be used here."""
    cap = parse_max_memory(max_memory)
    if cap is not None:
        if device != "auto":
            raise ValueError(f"--max-memory (max_memory) places the model itself: leave --device at auto "
                             f"(got {device!r})")
        check_devices(cap)
        return cap
    if device != "auto" or torch.cuda.device_count() < 2:
        return None
    free, _ = torch.cuda.mem_get_info(0)
    return None if weight_bytes(folder, dtype) <= FIT_SHARE * free else {}


def capped_device(max_memory: str | dict) -> torch.device:
    """The device a model capped by `max_memory` computes on (its first GPU, else MPS, else the CPU): its dtype follows
    it, so a cap of host memory alone on a GPU host loads float32 weights, as on the CPU."""
    cap = parse_max_memory(max_memory) or {}
    gpus = sorted(key for key in cap if isinstance(key, int))
    if gpus:
        return torch.device("cuda", gpus[0])
    return torch.device("mps") if "mps" in cap else torch.device("cpu")


def check_devices(cap: MemoryMap) -> None:
    """Refuse a cap that names a device this host lacks, or gives the model nowhere to compute."""
    gpus = torch.cuda.device_count()
    for key in cap:
        if isinstance(key, int) and key >= gpus:
            have = f"cuda:0 to cuda:{gpus - 1}" if gpus else "none"
            raise ValueError(f"--max-memory (max_memory) names cuda:{key}, but this host's CUDA GPUs are: {have}")
        if key == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
            raise ValueError("--max-memory (max_memory) names mps, but MPS is not available on this host")
    if set(cap) == {"disk"}:
        raise ValueError("--max-memory (max_memory) names only disk: give a device to compute on too (e.g. cpu=8GiB)")


def weight_bytes(folder: Path, dtype: torch.dtype) -> int:
    """Bytes the folder's weights take in `dtype`: element counts from the safetensors headers (nothing is loaded)."""
    from safetensors import safe_open

    elements = 0
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(path, framework="pt") as weights:
            elements += sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
    return elements * torch.empty((), dtype=dtype).element_size()


def load_sharded(folder: Path, dtype: torch.dtype, cap: MemoryMap, *, trust_remote_code: bool):
    """(model, loading info): the model dispatched by accelerate under `cap`, as `from_pretrained` gives them."""
    from transformers import AutoModelForCausalLM

    offload = cache_root() / "offload" / uuid.uuid4().hex  # one per load: two processes never share index files
    model, info = AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, trust_remote_code=trust_remote_code, use_safetensors=True, output_loading_info=True,
        device_map="auto", max_memory=cap or None, offload_folder=str(offload))
    weakref.finalize(model, shutil.rmtree, offload, True)
    return model, info

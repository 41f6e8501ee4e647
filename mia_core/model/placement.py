"""Where a model's parts run, for models on one device and for models dispatched by accelerate across several.

A sharded model (`device_map="auto"`, `mia_core.model.sharding`) has parts on several GPUs, on the CPU, or offloaded
to disk (their weights then sit on the "meta" device and accelerate's hooks load them for each call). So "the
model's device" is not its first parameter's: inputs go where the input embedding runs, a module's output lands
where that module runs, and an offloaded module's weights exist only while it is onloaded.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
from torch import nn


def hook_device(module: nn.Module) -> torch.device | None:
    """The device accelerate runs `module` on (its `AlignDevicesHook`'s execution device), or None without a hook."""
    hook = getattr(module, "_hf_hook", None)
    for each in getattr(hook, "hooks", (hook,)) if hook is not None else ():
        device = getattr(each, "execution_device", None)
        if device is not None:
            return torch.device(f"cuda:{device}" if isinstance(device, int) else device)
    return None


def run_device(model: nn.Module, module: nn.Module) -> torch.device:
    """Where `module` (a part of `model`) runs: its own or its nearest ancestor's hook device, else its weights'."""
    if getattr(model, "hf_device_map", None):  # dispatched: a hook on the module or on a part that holds it
        names = {id(m): name for name, m in model.named_modules()}
        parts = names.get(id(module), "").split(".")
        for depth in range(len(parts), -1, -1):
            device = hook_device(model.get_submodule(".".join(parts[:depth])) if depth else model)
            if device is not None:
                return device
    for tensor in module.parameters():
        if tensor.device.type != "meta":
            return tensor.device
    return next(model.parameters()).device


def input_device(model: nn.Module) -> torch.device:
    """Where a batch's input ids go: the input embedding's device (the first parameter's for a model on one)."""
    return run_device(model, model.get_input_embeddings())


def is_offloaded(module: nn.Module) -> bool:
    """Whether accelerate keeps `module`'s own weights off its device (CPU or disk offload) between calls."""
    hook = getattr(module, "_hf_hook", None)
    return any(getattr(each, "offload", False) for each in getattr(hook, "hooks", (hook,))) if hook else False


@contextmanager
def onloaded(module: nn.Module) -> Iterator[nn.Module]:
    """`module` with its weights on its execution device for the block, even when offloaded (accelerate's own
    pre/post-forward hooks, as one call of the module would run them): code that reads `module.weight` directly
    (the chunked head of `mia_core.model.forward`) then works on a dispatched model too."""
    if not is_offloaded(module):
        yield module
        return
    hook = module._hf_hook
    hook.pre_forward(module)
    try:
        yield module
    finally:
        hook.post_forward(module, None)


def cuda_devices(model: nn.Module) -> list[torch.device]:
    """The CUDA devices in a dispatched model's device map, in order (empty for a model moved whole to a device)."""
    device_map = getattr(model, "hf_device_map", None) or {}
    found = {torch.device(f"cuda:{d}" if isinstance(d, int) else d) for d in device_map.values()
             if isinstance(d, int) or str(d).startswith("cuda")}
    return sorted(found, key=lambda d: d.index or 0)

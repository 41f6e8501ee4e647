"""Where and in what precision a model runs: "auto" resolved to the best device present and its dtype."""
from __future__ import annotations

import torch


def resolve_device(device: str) -> torch.device:
    """"auto" → cuda, mps, cpu (first available); otherwise the named device."""
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """"auto" → bf16 (or fp16) on CUDA, fp32 elsewhere; names like "bfloat16" are accepted."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cuda":
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    try:
        return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
                "float64": torch.float64, "fp64": torch.float64}[dtype]
    except KeyError:
        raise ValueError(f"dtype must be auto, float32, bfloat16, float16 or float64 (got {dtype!r})") from None

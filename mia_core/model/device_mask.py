"""A padded batch's attention mask built on the device, so that launching a batch never waits for the device.

Given a 2-D padding mask, transformers asks the device whether anything is padded (to use SDPA's causal kernel
when nothing is) and reads the answer back; on CUDA the host then waits for every batch queued before it, which
defeats launching ahead (`pipeline`): the host could run at most one batch ahead. The host already knows which
batches are padded. For those, the mask transformers would build — causal, and no key beyond the row's own
tokens — is built here on the device without reading anything back, and passed as a 4-D mask, which transformers
uses as it is. Batches without padding keep the 2-D mask (SDPA's causal kernel, as before).

Only architectures whose attention is plain causal attention over the whole sequence, under SDPA, take it (no
sliding windows, no positions derived from the mask): the same booleans as transformers' own mask, hence the same
kernel and the same numbers (tests compare each of them bit for bit with the 2-D mask).
"""
from __future__ import annotations

import torch
from torch import nn

#: Architectures whose SDPA attention is causal over the whole sequence and whose positions do not come from the
#: mask (OPT's do; Mistral, Qwen and Phi-3 may slide a window), checked one by one against the 2-D mask.
DEVICE_MASK_TYPES = frozenset({"llama", "gpt_neox", "olmo", "olmo2", "phi", "stablelm", "gpt2"})


def takes_device_mask(model: nn.Module) -> bool:
    """Whether this model computes the same numbers from `causal_padding_mask` as from its 2-D padding mask."""
    config = getattr(model, "config", None)
    return (getattr(config, "model_type", None) in DEVICE_MASK_TYPES
            and getattr(config, "_attn_implementation", None) == "sdpa")


def causal_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """(b, 1, T, T) bool from a (b, T) padding mask: row b's query t sees key s when s ≤ t and s is a real token.

    Built with device operations only (nothing read back), on the mask's device.
    """
    width = mask.shape[1]
    causal = torch.ones((width, width), dtype=torch.bool, device=mask.device).tril_()  # (T, T)
    return causal[None, None] & mask.bool()[:, None, None, :]

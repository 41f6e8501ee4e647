"""Probe's proxy model: a copy of the target fine-tuned on the prompt-wrapped texts of A (Liu et al. 2024, step 2).

As the authors' `ft_proxy_model_ds.py`: causal-LM loss on every token of the wrapped text, AdamW at a constant LR,
2 epochs, shuffled batches (seeded). Two recorded deviations are allowed: LoRA adapters (rank `lora_r` on the
architecture's attention and FFN projections) instead of full fine-tuning — full fine-tuning needs about 16 bytes
per parameter — and the model's own dtype instead of bf16. The target itself is never modified (a deep copy is
trained).
"""
from __future__ import annotations

import copy
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

from ...model.lora import LORA_TARGETS
from .activations import wrapped_ids

Progress = Callable[[int, int], None]


def proxy_model(model: nn.Module, tokenizer, texts: Sequence[str], *, lora_r: int, lr: float, epochs: int,
                batch_size: int, max_tokens: int, pad_id: int, seed: int, progress: Progress | None = None) -> nn.Module:
    """A fine-tuned copy of `model` (LoRA of rank `lora_r`, α = 2r; 0 = every weight), in eval mode."""
    from peft import LoraConfig, get_peft_model  # peft loads only when a proxy is trained

    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)  # the LoRA A matrices' draw (the caller's RNG state is restored below)
    proxy = copy.deepcopy(model)
    if lora_r > 0:
        targets = LORA_TARGETS.get(proxy.config.model_type)
        if targets is None:
            raise ValueError(f"probe has no LoRA targets for architecture {proxy.config.model_type!r} "
                             f"(known: {', '.join(sorted(LORA_TARGETS))}); use lora_r=0 (full fine-tuning)")
        proxy = get_peft_model(proxy, LoraConfig(r=lora_r, lora_alpha=2 * lora_r, lora_dropout=0.0,
                                                 target_modules=targets))
    else:
        proxy.requires_grad_(True)  # full fine-tuning: every weight of the copy (the target's flags are its own)
    device = next(proxy.parameters()).device
    seqs = [wrapped_ids(tokenizer, t, max_tokens) for t in texts]
    trainable = [p for p in proxy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=lr)  # constant LR, as the authors (no scheduler)
    rng = np.random.default_rng(seed)
    proxy.train()
    steps, done = epochs * -(-len(seqs) // batch_size), 0
    for _ in range(epochs):
        order = rng.permutation(len(seqs))
        for start in range(0, len(seqs), batch_size):
            batch = [seqs[i] for i in order[start: start + batch_size]]
            width = max(map(len, batch))
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            labels = torch.full((len(batch), width), -100, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, s in enumerate(batch):
                ids[i, : len(s)] = labels[i, : len(s)] = torch.tensor(s)
                mask[i, : len(s)] = 1
            loss = proxy(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if progress is not None:
                progress(done, steps)
    torch.random.set_rng_state(generator_state)
    return proxy.eval()

"""Continued pretraining of a LoRA adapter on member texts only (the Min-K% paper's §6 study, small).

The causal-LM loss on documents laid out as scoring sees them (document-boundary token first),
long documents cut into blocks; LoRA via `peft` on every attention and MLP projection. Seeded:
the LoRA initialisation, the data order and the split are reproducible.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

import torch

from ..model.boundary import boundary_token_id
from ..model.forward import pad_right
from ..model.lora import LORA_TARGETS


@dataclass(frozen=True)
class LoraSettings:
    """Training settings; the defaults built the committed demo-known adapter."""

    r: int = 16
    alpha: int = 32
    lr: float = 1e-3
    epochs: int = 4
    batch_size: int = 8
    block_tokens: int = 256
    warmup_steps: int = 10
    seed: int = 0


def training_blocks(tokenizer, texts: list[str], block_tokens: int) -> list[list[int]]:
    """Token blocks of ≤ block_tokens: each document starts with the boundary token, as when scored."""
    boundary = boundary_token_id(tokenizer)
    blocks = []
    for text in texts:
        ids = ([boundary] if boundary is not None else []) + tokenizer(text)["input_ids"]
        blocks += [ids[i : i + block_tokens] for i in range(0, len(ids), block_tokens) if len(ids[i : i + block_tokens]) > 1]
    return blocks


def batches_for_epoch(blocks: list[list[int]], batch_size: int, rng: random.Random) -> list[list[list[int]]]:
    """Shuffled batches; blocks of similar length are grouped (within windows of 8 batches) to cut padding."""
    order = list(range(len(blocks)))
    rng.shuffle(order)
    window = 8 * batch_size
    batches = []
    for start in range(0, len(order), window):
        group = sorted(order[start : start + window], key=lambda i: len(blocks[i]))
        batches += [[blocks[i] for i in group[j : j + batch_size]] for j in range(0, len(group), batch_size)]
    rng.shuffle(batches)
    return batches


def collate(batch: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask, and labels with padding ignored (-100)."""
    ids, mask = pad_right(batch, pad_id)
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def train_lora(model, tokenizer, texts: list[str], settings: LoraSettings = LoraSettings(),
               progress: Callable[[int, int, float], None] | None = None):
    """Wrap `model` with a fresh LoRA adapter and train it on `texts`; returns (peft model, step losses)."""
    from peft import LoraConfig, get_peft_model

    targets = LORA_TARGETS.get(model.config.model_type)
    if targets is None:
        raise ValueError(f"no LoRA target list for architecture {model.config.model_type!r}; known: {sorted(LORA_TARGETS)}")
    torch.manual_seed(settings.seed)
    config = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=0.0, target_modules=targets,
                        task_type="CAUSAL_LM")
    peft_model = get_peft_model(model, config)
    blocks = training_blocks(tokenizer, texts, settings.block_tokens)
    rng = random.Random(settings.seed)
    plan = [batches_for_epoch(blocks, settings.batch_size, rng) for _ in range(settings.epochs)]
    total = sum(map(len, plan))
    params = [p for p in peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / settings.warmup_steps) * max(0.0, 1 - step / total))
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    peft_model.train()
    losses, step = [], 0
    for epoch_batches in plan:
        for batch in epoch_batches:
            loss = peft_model(**collate(batch, pad_id)).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(float(loss.detach()))
            step += 1
            if progress is not None:
                progress(step, total, losses[-1])
    peft_model.eval()
    return peft_model, losses

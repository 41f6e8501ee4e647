"""Probe features: every decoder block's output at the last token of the prompt-wrapped text (Liu et al. 2024, step 3).

The text is wrapped as the authors' `generate_acts.py` does and encoded with special tokens; each block's output is
read by a forward hook on the block itself (its first output when it returns a tuple), so the last block's output is
taken **before** the final norm (`output_hidden_states`' last entry is after it). Texts are batched with right padding
and read at their own last real token (from the attention mask), never at position −1 of the padded batch (the SoK
port's bug). Texts longer than `max_tokens` keep the wrapper's tail ("… Answer: ") and lose the end of the text.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

#: The authors' prompt (src/generate_acts.py); the text goes in {text}.
PROMPT = "Here is a statement:\n\n{text}\n\nIs the above statement correct? Answer: "
#: Texts per forward batch (right-padded).
BATCH_TEXTS = 8

Progress = Callable[[int, int], None]


def decoder_blocks(model: nn.Module) -> nn.ModuleList:
    """The model's decoder blocks: the ModuleList of `num_hidden_layers` modules (Llama, GPT-2, GPT-NeoX alike)."""
    n = getattr(model.config, "num_hidden_layers", None)
    lists = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) == n]
    if not lists:
        raise ValueError(f"probe could not find the {n} decoder blocks of {type(model).__name__}")
    return lists[0]


@contextmanager
def block_outputs(model: nn.Module) -> Iterator[list]:
    """While active, each forward fills the list with every block's output hidden state, (batch, T, d) each."""
    seen: list = []

    def keep(_module, _inputs, output) -> None:
        seen.append(output[0] if isinstance(output, tuple) else output)

    hooks = [block.register_forward_hook(keep) for block in decoder_blocks(model)]
    try:
        yield seen
    finally:
        for hook in hooks:
            hook.remove()


def wrapped_ids(tokenizer, text: str, max_tokens: int) -> list[int]:
    """Token ids of the prompt-wrapped text, special tokens included; over `max_tokens`, the text's end is cut."""
    ids = tokenizer(PROMPT.format(text=text), add_special_tokens=True)["input_ids"]
    if len(ids) <= max_tokens:
        return ids
    tail = len(tokenizer(PROMPT.split("{text}")[1], add_special_tokens=False)["input_ids"])
    if max_tokens <= tail:
        raise ValueError(f"probe's max_tokens ({max_tokens}) must exceed the prompt's tail ({tail} tokens)")
    return ids[: max_tokens - tail] + ids[-tail:]


@torch.no_grad()
def last_token_features(model: nn.Module, tokenizer, texts: Sequence[str], *, max_tokens: int, pad_id: int,
                        progress: Progress | None = None) -> np.ndarray:
    """(n_texts, n_layers, d) float32: every block's output at each wrapped text's last real token."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(texts), BATCH_TEXTS):
        seqs = [wrapped_ids(tokenizer, t, max_tokens) for t in texts[start: start + BATCH_TEXTS]]
        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)], mask[i, : len(s)] = torch.tensor(s), 1
        last = mask.sum(1) - 1  # (batch,) index of each text's last real token
        with block_outputs(model) as seen:
            model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False)
        rows = torch.arange(len(seqs))
        out.append(torch.stack([h[rows, last.to(h.device)] for h in seen], 1).float().cpu().numpy())  # (batch, L, d)
        if progress is not None:
            progress(min(start + BATCH_TEXTS, len(texts)), len(texts))
    return np.concatenate(out) if out else np.zeros((0, len(decoder_blocks(model)), model.config.hidden_size),
                                                   np.float32)

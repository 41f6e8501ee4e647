"""The document-boundary token a model saw at the start of pretraining documents (BOS policy).

Rule (docs/methods.md, "BOS policy", `bos="auto"`), applied in order:
1. the tokenizer already puts its BOS first (LLaMA, Mistral, OPT) → prepend nothing;
2. the tokenizer's `bos_token`, unless it is a chat-turn marker (GPT-2, Pythia: `<|endoftext|>`);
3. `<|endoftext|>` if the vocabulary has it (SmolLM2, Qwen: the pretraining document separator);
4. the `eos_token`, unless it is a chat-turn marker;
5. nothing (the first token then goes unscored; the caller is told through `boundary_token=None`).
Chat-template tokens are never used: SmolLM2-Instruct reports `<|im_start|>` as BOS and
`<|im_end|>` as EOS, but its documents were separated by `<|endoftext|>`.
"""
from __future__ import annotations

import re

_CHAT_MARKER = re.compile(
    r"im_start|im_end|start_of_turn|end_of_turn|header_id|eot_id|<\|(user|assistant|system)\|>",
    re.IGNORECASE,
)


def is_chat_marker(token: str | None) -> bool:
    """True for chat-template control tokens such as `<|im_start|>` or `<start_of_turn>`."""
    return bool(token) and bool(_CHAT_MARKER.search(token))


def tokenizer_adds_bos(tokenizer) -> bool:
    """True when `tokenizer(text)` already starts with the BOS token."""
    bos_id = tokenizer.bos_token_id
    if bos_id is None:
        return False
    ids = tokenizer("a", add_special_tokens=True)["input_ids"]
    return len(ids) > 0 and ids[0] == bos_id


def boundary_token_id(tokenizer) -> int | None:
    """Id of the token to prepend under `bos="auto"`, or None (see the module rule)."""
    if tokenizer_adds_bos(tokenizer):
        return None
    if tokenizer.bos_token is not None and not is_chat_marker(tokenizer.bos_token):
        return tokenizer.bos_token_id
    vocab = tokenizer.get_vocab()
    if "<|endoftext|>" in vocab:
        return vocab["<|endoftext|>"]
    if tokenizer.eos_token is not None and not is_chat_marker(tokenizer.eos_token):
        return tokenizer.eos_token_id
    return None

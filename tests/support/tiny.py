"""Tiny offline models and tokenizers for tests: built from a config in milliseconds, no hub access."""
from __future__ import annotations

import random
from functools import lru_cache

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

WORDS = (
    "the of and to in is was for on that with as by at from his her an which are were this be "
    "river castle engine protein galaxy violin harbour orchard senate glacier comet lantern "
    "merchant cathedral theorem bishop falcon canyon meadow tunnel quartz saffron monsoon ember "
    "seventeen north ancient silver painted quietly elected founded married ruled built wrote"
).split()


def random_texts(n: int, *, seed: int, min_words: int = 8, max_words: int = 24) -> list[str]:
    """Random word sequences: held-out texts are unpredictable, so memorised ones stand out."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words))]
        words[0] = words[0].capitalize()
        out.append(" ".join(words) + ".")
    return out


@lru_cache(maxsize=4)
def tiny_tokenizer(vocab_size: int = 300) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on random texts; `<|endoftext|>` is its boundary token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(random_texts(400, seed=vocab_size) + [" ".join(WORDS)], trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )


@lru_cache(maxsize=1)
def word_tokenizer() -> PreTrainedTokenizerFast:
    """One id per word of `WORDS` (lower-cased) and one for ".": a tiny model learns texts of these in fewer steps."""
    vocab = {"<|endoftext|>": 0, **{w: i + 1 for i, w in enumerate(dict.fromkeys(WORDS))}}
    vocab.update({".": len(vocab), "[UNK]": len(vocab) + 1})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", pad_token="<|endoftext|>"
    )


def tiny_llama(vocab_size: int, *, seed: int = 0, max_positions: int = 256, logits_width: int | None = None):
    """A 2-layer Llama-architecture causal LM; `logits_width` may exceed the tokenizer's vocabulary."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=logits_width or vocab_size,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return LlamaForCausalLM(config).eval()


def tiny_gpt2(vocab_size: int, *, seed: int = 0, max_positions: int = 256):
    """A 2-layer GPT-2-architecture causal LM (a second architecture, e.g. for reference models)."""
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=max_positions)
    return GPT2LMHeadModel(config).eval()


def train_causal_lm(model, tokenizer, texts: list[str], *, steps: int, lr: float = 3e-3, seed: int = 0):
    """Fit a tiny model to `texts` (each preceded by `<|endoftext|>`, as scoring sees documents)."""
    torch.manual_seed(seed)
    boundary = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    seqs = [[boundary] + tokenizer(t)["input_ids"] for t in texts]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), boundary, dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        labels[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(steps):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def save_tiny_model(folder, *, seed: int = 0, max_positions: int = 256):
    """A tiny Llama (300-token tokenizer) saved as a local model folder, as `mia --model FOLDER` reads it."""
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=seed, max_positions=max_positions).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder

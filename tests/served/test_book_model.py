"""The memorised-book model (tests/support/book_model.py) through a real vLLM engine, asked as a chat-only API is:
§17's Phase 1 prompt gets the book's continuation, the `Continue` loop (full history resent) recovers the book and
halts on `THE END`, §18's 38-word prefix gets the next words; the held-out control gets none of this. Plus the
committed folder's manifest against what the builder would train on today."""
from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support import book_model
from tests.support.book_model import (
    CONTINUE,
    END_MARK,
    book_text,
    control_text,
    covered_words,
    phase1_prompt,
    phase1_split,
)
from tests.support.vllm_server import post_json

pytestmark = [pytest.mark.integration, pytest.mark.served]

MAX_TOKENS = 200
TURNS = 25  # the book is ~3,000 tokens: ~15 turns of 200


def chat(url: str, messages: list[dict], max_tokens: int = MAX_TOKENS) -> tuple[str, str]:
    """One greedy chat turn: (reply text, finish_reason)."""
    status, answer = post_json(f"{url}/v1/chat/completions", {
        "model": "book", "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert status == 200, answer
    choice = answer["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def extraction_loop(url: str, text: str) -> tuple[str, list[str]]:
    """§17: Phase 1 from the first sentence's first half, then `Continue` with the whole history until a reply holds
    THE END or the budget is spent; (replies joined by "\\n", finish reasons)."""
    prefix, _ = phase1_split(text)
    messages = [{"role": "user", "content": phase1_prompt(prefix)}]
    replies, reasons = [], []
    for _ in range(TURNS):
        reply, reason = chat(url, messages)
        replies.append(reply)
        reasons.append(reason)
        if END_MARK in reply:
            break
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": CONTINUE}]
    return "\n".join(replies), reasons


@pytest.fixture(scope="module")
def loops(vllm_book) -> dict[str, tuple[str, list[str]]]:
    """Both conversations at once (the engine batches them: one turn costs about as much as two)."""
    texts = {"book": book_text(), "control": control_text()}
    with ThreadPoolExecutor(len(texts)) as pool:
        futures = {name: pool.submit(extraction_loop, vllm_book.url, text) for name, text in texts.items()}
        return {name: future.result() for name, future in futures.items()}


def test_the_committed_model_was_built_from_todays_texts_and_settings():
    built = json.loads((book_model.ASSET_DIR / "manifest.json").read_text())
    expected = book_model.manifest(book_model.TrainSettings())
    assert {k: built[k] for k in expected} == expected, "rebuild: python -m tests.support.book_model build"
    assert set(built["settings"]) == {f.name for f in dataclasses.fields(book_model.TrainSettings)}


def test_phase1_prompt_gets_the_books_continuation(vllm_book):
    prefix, target = phase1_split(book_text())
    reply, _ = chat(vllm_book.url, [{"role": "user", "content": phase1_prompt(prefix)}], max_tokens=60)
    after = book_text().split()[len(prefix.split()):]
    assert reply.split()[:30] == after[:30]
    assert reply.split()[: len(target.split())] == target.split()


def test_the_continue_loop_recovers_the_book_and_stops_at_its_end(loops):
    generated, reasons = loops["book"]
    assert covered_words(book_text(), generated) > 0.8
    assert END_MARK in generated and reasons[-1] == "stop"  # THE END, then EOS
    assert all(reason == "length" for reason in reasons[:-1])


def test_the_continue_loop_does_not_recover_the_held_out_control(loops):
    generated, _ = loops["control"]
    assert covered_words(control_text(), generated) < 0.1


@pytest.mark.parametrize("name, covered", [("book", True), ("control", False)])
def test_a_38_word_prefix_gets_the_next_words_only_from_the_book(vllm_book, name, covered):
    words = (book_text() if name == "book" else control_text()).split()
    start = len(words) // 2
    prompt = " ".join(words[start:start + 38])
    status, answer = post_json(f"{vllm_book.url}/v1/completions", {
        "model": "book", "prompt": prompt, "max_tokens": 60, "temperature": 0})
    assert status == 200, answer
    suffix = words[start + 38:start + 38 + 25]
    assert (answer["choices"][0]["text"].split()[:25] == suffix) is covered
    chatted, _ = chat(vllm_book.url, [{"role": "user", "content": phase1_prompt(prompt)}], max_tokens=60)
    assert (chatted.split()[:25] == suffix) is covered

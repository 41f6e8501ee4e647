"""Black-box extraction against a real vLLM engine serving a tiny model that memorised a book (the opening of Macbeth;
tests/support/book_model.py) through its OpenAI-compatible chat and completions endpoints, no log-probs asked for.

The model itself: §17's Phase 1 prompt gets the book's continuation and §18's 38-word prefix the next words, the
held-out control (the opening of Hamlet) none of this; the committed folder's manifest is what the builder would train
on today. Then MIA Lens's own runs on it: the two phases recover the book and not the control, nv-recall equals a plain
recomputation from the stored answers, the record verifies and the report shows both; sampled windows give p̂ and its
interval for memorised and held-out windows. One module, so the engine runs only while it does (`vllm_book` is
module-scoped: an idle engine costs a third of a core)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import pytest

from mia_core.audit.api_extraction import ApiExtractionRun, Text
from mia_core.audit.api_report import api_report_html
from mia_core.audit.api_verify import replay_conversation, verify_run
from mia_core.blackbox.normalize import words as normalized_words
from mia_core.blackbox.nv_recall import PAPER_PASSES, nv_recall
from mia_core.blackbox.two_phase import ExtractionSettings
from mia_core.blackbox.gl_bound import file_sha256
from mia_core.blackbox.two_phase import INSTRUCTION, SEPARATOR
from mia_core.blackbox.window_sampling import WindowSettings, word_windows
from mia_core.model.chat.chat_model import connect_chat
from mia_core.runs.api_results import stored_results
from mia_core.runs.store import ResultsStore
from tokenizers import Tokenizer

from tests.blackbox.test_nv_recall import reference
from tests.support import book_model
from tests.support.book_model import book_text, control_text, phase1_prompt, phase1_split
from tests.support.vllm_server import post_json

pytestmark = [pytest.mark.integration, pytest.mark.served]

MAX_TOKENS = 200


def chat(url: str, messages: list[dict], max_tokens: int = MAX_TOKENS) -> tuple[str, str]:
    """One greedy chat turn: (reply text, finish_reason)."""
    status, answer = post_json(f"{url}/v1/chat/completions", {
        "model": "book", "messages": messages, "max_tokens": max_tokens, "temperature": 0})
    assert status == 200, answer
    choice = answer["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


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


def test_the_memorised_book_is_extracted_and_the_control_is_not(vllm_book, tmp_path):
    model = connect_chat(f"{vllm_book.url}/v1?api=chat&model=book&concurrency=2")
    store = ResultsStore(tmp_path / "s.duckdb")
    book, control = book_text(), control_text()
    texts = [Text("Macbeth", book, "book"), Text("Hamlet", control, "control")]
    settings = ExtractionSettings(max_tokens=500, max_turns=20, phase1_max_tokens=500)
    # the paper's pitfall, for real: Macbeth says "I cannot", so the refusal patterns read over the whole answer halt
    # a true continuation; the halt, its pattern and where it matched are recorded
    halted = ApiExtractionRun(model, store, texts, settings).run().results.set_index("name")
    assert (halted.loc["Macbeth", "halt"], halted.loc["Macbeth", "halt_pattern"]) == ("refusal", r"\bi cannot\b")
    outcome = ApiExtractionRun(model, store, texts, replace(settings, refusal_scope="head")).run()
    results = outcome.results.set_index("name")
    assert results.loc["Macbeth", "nv_recall"] > 0.8 and results.loc["Macbeth", "claim_blocks"] >= 1
    assert (results.loc["Macbeth", "halt"], results.loc["Macbeth", "halt_pattern"]) == ("stop_string", "THE END")
    assert results.loc["Hamlet", "nv_recall"] < 0.1 and results.loc["Hamlet", "claim_blocks"] == 0
    assert verify_run(store, outcome.run_id).fault is None
    manifest = store.run(outcome.run_id)["config"]
    for unit, text, name in (("book-000", book, "Macbeth"), ("control-000", control, "Hamlet")):
        generation = replay_conversation(store, outcome.run_id, manifest, unit, text).generation
        plain = reference(normalized_words(text), normalized_words(generation), PAPER_PASSES)
        ours = nv_recall(text, generation)
        assert (ours.m, ours.missing, ours.additional, ours.max_block) == (
            plain["m"], plain["missing"], plain["additional"], plain["max_block"])
        assert results.loc[name, "nv_recall"] == plain["nv_recall"]
    page = api_report_html(store, outcome.run_id)
    assert f"<b>Macbeth</b> (book): nv-recall {results.loc['Macbeth', 'nv_recall']:.1%}" in page
    assert f"<b>Hamlet</b> (negative control): nv-recall {results.loc['Hamlet', 'nv_recall']:.1%}" in page
    assert "stop_string (THE END)" in page and outcome.head in page


def test_sampled_windows_of_the_memorised_book_are_discoverable_and_the_controls_are_not(vllm_book, tmp_path):
    model = connect_chat(f"{vllm_book.url}/v1?api=chat&model=book&concurrency=2")
    store = ResultsStore(tmp_path / "s.duckdb")
    first = lambda text: " ".join(text.split()[200:314])  # noqa: E731  (two windows from the middle of each)
    settings = WindowSettings(samples=8, per_request=4, greedy_repeats=2)
    outcome = ApiExtractionRun(model, store, [Text("Macbeth", first(book_text()), "book"),
                                              Text("Hamlet", first(control_text()), "control")], settings).run()
    assert outcome.status == "done" and verify_run(store, outcome.run_id).fault is None
    results = outcome.results.set_index("name")
    assert results.loc["Macbeth", "n_windows"] == 2 and results.loc["Hamlet", "n_windows"] == 2
    # greedy, the memorised windows come back word for word; sampled at temperature 1 this small model drifts within
    # 38 words more often than not, yet some samples match: "extracted in n_s tries"
    assert results.loc["Macbeth", "share_greedy"] == 1.0 and results.loc["Macbeth", "max_p_hat"] > 0
    assert results.loc["Hamlet", "max_p_hat"] == 0.0 and results.loc["Hamlet", "share_extracted"] == 0.0
    assert results.loc["Hamlet", "share_greedy"] == 0.0
    assert results.loc["Hamlet", "max_p_hi"] == pytest.approx(1 - 0.025 ** (1 / 8))  # Clopper–Pearson at k = 0


def path_logprob(url: str, prompt_ids: list[int], path_ids: list[int]) -> float:
    """log p(path | prompt) from the engine's prompt log-probs of prompt + path: an independent computation."""
    status, answer = post_json(f"{url}/v1/completions", {"model": "book", "prompt": prompt_ids + path_ids,
                                                         "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0})
    assert status == 200, answer
    rows = answer["choices"][0]["prompt_logprobs"][len(prompt_ids):]
    return sum(row[str(token)]["logprob"] for row, token in zip(rows, path_ids))


def test_the_log_prob_bound_is_exact_for_memorised_windows_and_rules_out_held_out_ones(vllm_book, tmp_path):
    tokenizer_path = book_model.ASSET_DIR / "tokenizer.json"
    model = connect_chat(f"{vllm_book.url}/v1?api=chat&model=book&concurrency=2")
    assert model.tier.name == "GL" and model.tier.k_top == 20
    store = ResultsStore(tmp_path / "s.duckdb")
    middle = lambda text: " ".join(text.split()[200:314])  # noqa: E731
    texts = {"Macbeth": middle(book_text()), "Hamlet": middle(control_text())}
    settings = WindowSettings(samples=1, greedy_repeats=0, tokenizer=str(tokenizer_path),
                              tokenizer_sha256=file_sha256(tokenizer_path))
    outcome = ApiExtractionRun(model, store, [Text(n, t, "book") for n, t in texts.items()], settings).run()
    assert outcome.status == "done" and verify_run(store, outcome.run_id).fault is None
    stored = stored_results(store, outcome.run_id)
    results = {name: stored[unit] for name, unit in zip(outcome.results["name"], outcome.results["unit"])}
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    for name, text in texts.items():
        for window, row in zip(word_windows(text, settings), results[name]["windows"]):
            status, tokenized = post_json(f"{vllm_book.url}/tokenize", {"model": "book", "add_generation_prompt": True,
                                          "messages": [{"role": "user", "content": INSTRUCTION + SEPARATOR + window.prefix}]})
            target = window.gap + window.suffix if row["gl_with_gap"] else window.suffix
            true = path_logprob(vllm_book.url, tokenized["tokens"], tokenizer.encode(target, add_special_tokens=False).ids)
            if name == "Macbeth":  # recited token for token: the bound is the path's own log-probability
                assert row["gl_exact_path"] and row["gl_log_p"] == pytest.approx(true, abs=2e-3)
                assert row["gl_discoverable"] == [True, True]
            else:  # diverges at once: an upper bound that holds, and rules the window out
                assert not row["gl_exact_path"] and true <= row["gl_log_p"] + 1e-4
                assert row["gl_ruled_out"][1]  # no 100 tries reach it with 95% odds
    assert results["Macbeth"]["gl_exact_paths"] == 2

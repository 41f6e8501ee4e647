"""A book-extraction run on a chat API end to end, against a loopback API that recites one book
(`tests.support.fake_chat`): the numbers as recomputed by hand, the halting rules, the budget, a run killed with
SIGKILL and resumed (no stored request sent again, identical results), and `mia verify` naming an altered record."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from mia_core.audit.api_extraction import ApiExtractionRun, Text
from mia_core.audit.api_report import api_report_html
from mia_core.audit.api_verify import verify_run
from mia_core.blackbox.two_phase import ExtractionSettings, seed_of
import mia_core.model.chat.client as client_module
from mia_core.model.chat.chat_model import connect_chat
from mia_core.model.chat.client import ChatClient, ChatError
from mia_core.model.chat.spec import parse_chat_spec
from mia_core.model.chat.prices import Budget
from mia_core.runs.api_results import results_table
from mia_core.runs.store import ResultsStore

from tests.support.fake_chat import FakeChat

WORDS = "alpha beta gamma delta river stone light house green small dark quiet open old new far".split()
MIA = [sys.executable, "-m", "mia_core"]


def prose(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "." for _ in range(n_words // 10))


BOOK = prose(600, 1) + " THE END"
CONTROL = prose(600, 2)


def texts() -> list[Text]:
    return [Text("The Book", BOOK, "book"), Text("Late Book", CONTROL, "control")]


def run_once(api: FakeChat, store: ResultsStore, **settings) -> object:
    model = connect_chat(api.spec(price_in=2, price_out=8))
    return ApiExtractionRun(model, store, texts(), ExtractionSettings(**{"max_tokens": 50, "phase1_max_tokens": 50,
                                                                         **settings})).run()


def test_a_recited_book_is_extracted_and_the_control_is_not(tmp_path):
    with FakeChat(BOOK) as api:
        outcome = run_once(api, ResultsStore(tmp_path / "s.duckdb"))
    book, control = outcome.results.iloc[0], outcome.results.iloc[1]
    seed = seed_of(BOOK)
    n_book = len(BOOK.split())
    # the API recites every word after the seed's prefix, 50 a turn, and stops at "THE END"
    recited = n_book - len(seed.prefix.split())
    assert (book.halt, book.halt_pattern, book.phase2_turns) == ("stop_string", "THE END", -(-recited // 50) - 1)
    assert book.m == recited and book.nv_recall == recited / n_book and book.missing == n_book - recited
    assert book.phase1_s == 1.0 and book.claim_blocks == 1
    assert (control.halt, control.nv_recall, control.claim_blocks) == ("probe_failed", 0.0, 0)
    assert outcome.status == "done" and outcome.spent.requests == book.answers + control.answers + 1  # + the probe


def test_the_run_needs_a_negative_control(tmp_path):
    with FakeChat(BOOK) as api:
        with pytest.raises(ValueError, match="needs a negative control"):
            ApiExtractionRun(connect_chat(api.spec()), ResultsStore(tmp_path / "s.duckdb"), texts()[:1],
                             ExtractionSettings())


def test_a_refusal_halts_the_book_with_its_pattern_and_an_empty_answer_spends_a_turn(tmp_path):
    answers = iter(["Mr. " + " ".join(seed_of(BOOK).target.split()), "", "I'm sorry, but I can't continue this text."])
    with FakeChat(BOOK) as api:
        model = connect_chat(api.spec(concurrency=1))  # one text at a time: the answers below are the book's
        api.reply = lambda source, n: next(answers, "nothing")
        outcome = ApiExtractionRun(model, ResultsStore(tmp_path / "s.duckdb"), texts(), ExtractionSettings()).run()
    book = outcome.results.iloc[0]
    assert (book.halt, book.halt_pattern, book.halt_step, book["empty"], book.refusals) == (
        "refusal", r"\bsorry[, ]*(?:but )?i can[\u0027\u2019]t\b", 2, 1, 1)


def test_the_budget_stops_the_run_before_a_request_and_a_larger_one_goes_on(tmp_path):
    store = ResultsStore(tmp_path / "s.duckdb")
    with FakeChat(BOOK) as api:
        model = connect_chat(api.spec(price_in=2, price_out=8))
        settings = ExtractionSettings(max_tokens=50, phase1_max_tokens=50)
        first = ApiExtractionRun(model, store, texts(), settings, budget=Budget(tokens=2000)).run()
        assert first.status == "budget" and first.spent.tokens <= 2000
        sent = len(api.received)
        second = ApiExtractionRun(model, store, texts(), settings).run()
        assert second.status == "done" and second.run_id == first.run_id
        fresh = run_once(api, ResultsStore(tmp_path / "fresh.duckdb"))
    assert second.results.equals(fresh.results)
    # the fresh run sent its probe and its requests; the resumed run only what the first had not sent
    assert len(api.received) - sent - fresh.spent.requests == second.spent.requests - first.spent.requests


def test_verify_passes_then_names_an_altered_record_and_an_altered_result(tmp_path):
    store = ResultsStore(tmp_path / "s.duckdb")
    with FakeChat(BOOK) as api:
        outcome = run_once(api, store)
    check = verify_run(store, outcome.run_id)
    assert check.fault is None and check.head == outcome.head and check.n_records == outcome.spent.requests
    assert check.words().startswith(f"verified: {check.n_records} records, head {outcome.head}, results identical")
    with duckdb.connect(str(store.path)) as con:
        seq, response = con.execute("SELECT seq, response FROM api_calls WHERE call_id = 'book-000/2/0'").fetchone()
        flipped = bytearray(response)
        flipped[len(flipped) // 2] ^= 1
        con.execute("UPDATE api_calls SET response = ? WHERE seq = ?", [bytes(flipped), seq])
    fault = verify_run(store, outcome.run_id).fault
    assert fault.startswith(f"record {seq} (book-000/2/0): ")
    with duckdb.connect(str(store.path)) as con:
        con.execute("UPDATE api_calls SET response = ? WHERE seq = ?", [response, seq])
        result = json.loads(con.execute("SELECT result FROM api_results WHERE unit = 'book-000'").fetchone()[0])
        result["nv_recall"] = 0.99
        con.execute("UPDATE api_results SET result = ? WHERE unit = 'book-000'", [json.dumps(result)])
    assert verify_run(store, outcome.run_id).fault == ("the stored result of book-000 differs from its recomputation "
                                                      "(nv_recall)")


def _command(api: FakeChat, tmp_path: Path, out: Path, store: Path) -> list[str]:
    out.mkdir(exist_ok=True)
    (tmp_path / "book.txt").write_text(BOOK)
    (tmp_path / "late.txt").write_text(CONTROL)
    return MIA + ["extract-books", "--model", api.spec(), "--books", str(tmp_path / "book.txt"), "--control",
                  str(tmp_path / "late.txt"), "--output-dir", str(out), "--store", str(store), "--max-tokens", "40",
                  "--probe-tokens", "40"]


def test_a_killed_run_resumes_without_sending_a_stored_request_again(tmp_path):
    with FakeChat(BOOK) as api:
        whole = ApiExtractionRun(connect_chat(api.spec()), ResultsStore(tmp_path / "whole.duckdb"), [
            Text("book", BOOK, "book", str(tmp_path / "book.txt")), Text("late", CONTROL, "control",
                                                                        str(tmp_path / "late.txt"))],
            ExtractionSettings(max_tokens=40, phase1_max_tokens=40)).run()
        api.received.clear()
        api.delay = 0.2
        command = _command(api, tmp_path, tmp_path / "killed", tmp_path / "killed.duckdb")
        job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while len(api.received) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        store = ResultsStore(tmp_path / "killed.duckdb")
        with duckdb.connect(str(store.path)) as con:
            stored = {bytes(r[0]) for r in con.execute("SELECT request FROM api_calls WHERE status = 200 AND "
                                                       "unit <> 'probe'").fetchall()}
        assert len(stored) >= 4
        before = len(api.received)
        api.delay = 0.0
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr
        sent_again = [body for body in api.received[before + 1:] if body in stored]  # [before]: the resume's probe
        assert sent_again == []
    run_id = json.loads((tmp_path / "killed" / "extraction.json").read_text())["run_id"]
    assert run_id == whole.run_id
    resumed_results = results_table(store, run_id)
    assert resumed_results.equals(whole.results)
    assert verify_run(store, run_id).fault is None


def test_the_report_shows_book_and_control_the_limits_and_the_head_hash_escaped(tmp_path):
    store = ResultsStore(tmp_path / "s.duckdb")
    with FakeChat(BOOK) as api:
        model = connect_chat(api.spec(price_in=2, price_out=8))
        outcome = ApiExtractionRun(model, store, [Text("<script>alert(1)</script>", BOOK, "book"),
                                                  Text("Late Book", CONTROL, "control")],
                                   ExtractionSettings(max_tokens=50, phase1_max_tokens=50)).run()
    page = api_report_html(store, outcome.run_id)
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "(book): nv-recall 100.0%" not in page  # the seed's prefix is never reproduced: it was given
    book = outcome.results.iloc[0]
    assert f"(book): nv-recall {book.nv_recall:.1%}; 1 block(s) of at least 100 words: evidence that the model " \
           "reproduces this text" in page
    assert "<b>Late Book</b> (negative control): nv-recall 0.0%; no block of 100 words: not evidence" in page
    assert "nv-recall is a loose lower bound" in page and "not evidence about the rest of the model" in page
    assert outcome.head in page and f"mia verify {outcome.run_id} --store {store.path}" in page
    assert "no jailbreak" in page and "$2.00 in / $8.00 out" in page


def test_mia_extract_samples_windows_of_a_chat_api(tmp_path):
    text = " ".join(BOOK.split()[:120])
    (tmp_path / "t.txt").write_text(text)
    with FakeChat(BOOK) as api:
        done = subprocess.run(MIA + ["extract", "--model", api.spec(), "--input", str(tmp_path / "t.txt"), "--output",
                                     str(tmp_path / "w.csv"), "--summary", str(tmp_path / "s.csv"), "--samples", "4",
                                     "--greedy-repeats", "1", "--stride", "50", "--store", str(tmp_path / "s.duckdb")],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    windows = pd.read_csv(tmp_path / "w.csv")
    # 38 + 38 words every 38 words over 120 words: two windows, each recited by the API every time
    assert len(windows) == 2 and (windows["strict"] == 4).all() and (windows["greedy_strict"] == 1).all()
    assert (windows["p_hat"] == 1.0).all() and windows["p_lo"].iloc[0] == pytest.approx((0.025) ** (1 / 4))
    assert "largest p̂ 1.000" in done.stdout and "not the white-box p_z" in done.stdout


def test_two_processes_on_one_run_split_its_texts(tmp_path):
    texts_ = [Text("book", BOOK, "book")] + [Text(f"other {n}", prose(300, 10 + n), "book") for n in range(2)] + [
        Text("late", CONTROL, "control")]
    store_path = tmp_path / "s.duckdb"
    with FakeChat(BOOK) as api:
        api.delay = 0.05
        model = connect_chat(api.spec(concurrency=1))
        settings = ExtractionSettings(max_tokens=200, phase1_max_tokens=50)
        runs = [ApiExtractionRun(model, ResultsStore(store_path), texts_, settings) for _ in range(2)]
        sent_before = len(api.received)
        with ThreadPoolExecutor(2) as pool:  # two sessions at once, as two processes would be
            outcomes = list(pool.map(lambda run: run.run(), runs))
        sent = api.received[sent_before:]
    assert len(sent) == len(set(sent))  # no request sent twice: each text was extracted by one of them
    with duckdb.connect(str(store_path)) as con:
        units = con.execute("SELECT count(DISTINCT unit), count(*) FROM api_calls WHERE unit <> 'probe'").fetchone()
    assert units == (4, len(sent))
    assert {o.status for o in outcomes} <= {"done", "partial"} and "done" in {o.status for o in outcomes}
    assert verify_run(ResultsStore(store_path), outcomes[0].run_id).fault is None


def test_an_answer_over_the_size_bound_is_refused_as_it_streams(monkeypatch):
    monkeypatch.setattr(client_module, "MAX_CHAT_ANSWER_BYTES", 2_000)
    with FakeChat(BOOK) as api:
        client = ChatClient(parse_chat_spec(api.spec()))
        api.reply = lambda source, n: "word " * 1000  # ~5 KB of answer
        recorded = []
        with pytest.raises(ChatError, match="with more than 0.00190735 MB"):
            client.send({"model": "reciter", "messages": [{"role": "user", "content": "x"}]}, recorded.append,
                        token_bound=10)
    assert len(recorded) == 1 and recorded[0].status is None and "more than" in recorded[0].failure

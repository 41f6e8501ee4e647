"""A SimMIA run on a chat API end to end, against the loopback API (`tests.support.fake_chat`) scripted as a model that
knows one text: SimMIA* as the spec computes it from the answers, `mia verify` recomputing a run (and naming an
altered result), a run stopped by its budget and resumed sending nothing twice, and a SimMIA run with a registered
toy embedder replayed from its record (refused without the same embedder)."""
from __future__ import annotations

import json

import duckdb
import pytest

from mia_core.audit.api_extraction import ApiExtractionRun, Text
from mia_core.audit.api_procedures import procedure_for
from mia_core.audit.api_verify import replay, verify_run
from mia_core.blackbox.simmia import EMBEDDERS
from mia_core.blackbox.simmia_sampling import SimMiaSettings
from mia_core.blackbox.simmia_words import word_tokenize
from mia_core.model.chat.chat_model import connect_chat
from mia_core.model.chat.prices import Budget
from mia_core.runs.api_results import stored_results
from mia_core.runs.store import ResultsStore

from tests.blackbox.test_simmia import ToyEmbedder
from tests.support.fake_chat import FakeChat

KNOWN = "The silver castle stood by the river."
UNKNOWN = "Seventeen lanterns glowed over the theatre."
NONMEMBERS = ("Merchants argued about saffron prices in the harbour.", "A comet crossed the northern sky.")
N = 2


def reply(source: str, max_tokens: int) -> str:
    """A model that recites KNOWN word for word, unless known non-members come first; anything else: "the"."""
    so_far = source.removeprefix('Text so far: "').removesuffix('"')
    if so_far.startswith(NONMEMBERS[0]):
        return "zzz"
    words = word_tokenize(KNOWN)
    for k in range(1, len(words)):
        if so_far == "".join(words[:k]):
            return words[k].strip()
    return "the"


def settings(**changes) -> SimMiaSettings:
    return SimMiaSettings(**{"nonmembers": NONMEMBERS, "nonmember_source": "hand-written", "samples": N,
                             "per_request": 1, "max_calls": N, **changes})


def texts() -> list[Text]:
    return [Text("known", KNOWN, "book"), Text("unknown", UNKNOWN, "book")]


def run(api: FakeChat, store: ResultsStore, budget: Budget = Budget(), **changes):
    return ApiExtractionRun(connect_chat(api.spec(concurrency=1)), store, texts(), settings(**changes),
                            budget=budget).run()


def expected_star(text: str) -> float:
    """SimMIA* by the spec for the scripted model (every answer is one sample, N per position):

    KNOWN, plain: the label every time → (N+1)/(N+1) = 1; primed: "zzz", the label absent and not hit →
    zzz N+1, label 1 → 1/(N+2); r_k = 1/(N+2) at every position.
    UNKNOWN, plain: "the" (label absent unless it is "the") → 1/(N+2); primed → 1/(N+2): r_k = 1, except where the
    label is "the" or a word "the" starts (hit: (N+1)/(N+1) = 1 without the prefix)."""
    words = word_tokenize(text)
    plain = [reply('Text so far: "' + "".join(words[:k]) + '"', 0) for k in range(1, len(words))]
    ratios = []
    for k, answer in enumerate(plain, start=1):
        label = words[k].strip()
        hit = answer == label or label.lower().startswith(answer.lower()) or answer.lower().startswith(label.lower())
        f = 1.0 if hit else 1 / (N + 2)
        ratios.append((1 / (N + 2)) / f)
    return -sum(ratios) / len(ratios)


def test_simmia_star_of_a_run_is_the_spec_s_number_and_verify_recomputes_it(tmp_path):
    store = ResultsStore(tmp_path / "s.duckdb")
    with FakeChat(KNOWN) as api:
        api.reply = reply
        outcome = run(api, store)
    known, unknown = outcome.results.iloc[0], outcome.results.iloc[1]
    assert known.simmia_star_score == pytest.approx(-1 / (N + 2), rel=1e-15)
    assert known.simmia_star_score == pytest.approx(expected_star(KNOWN), rel=1e-15)
    assert unknown.simmia_star_score == pytest.approx(expected_star(UNKNOWN), rel=1e-15)
    # UNKNOWN: r_k = 1 at lanterns, glowed, over and "."; 1/(N+2) at "the" (sampled) and "theatre" (hit by "the")
    assert unknown.simmia_star_score == pytest.approx(-(4 + 2 / (N + 2)) / 6, rel=1e-15)
    assert known.simmia_star_score > unknown.simmia_star_score  # higher = member
    assert (known.variant, known.simmia_score, known.embedding) == ("SimMIA*", None, None)
    n_words = len(word_tokenize(KNOWN))
    assert known.requests == 2 * (n_words - 1) * N and known.positions_short == 0
    assert outcome.status == "done" and procedure_for(settings()).kind == "api-simmia"
    check = verify_run(store, outcome.run_id)
    assert check.fault is None and check.n_results == 2
    assert replay(store, outcome.run_id) == stored_results(store, outcome.run_id)
    with duckdb.connect(str(store.path)) as con:
        result = json.loads(con.execute("SELECT result FROM api_results WHERE unit = 'book-000'").fetchone()[0])
        result["simmia_star_score"] = 0.5
        con.execute("UPDATE api_results SET result = ? WHERE unit = 'book-000'", [json.dumps(result)])
    assert verify_run(store, outcome.run_id).fault == ("the stored result of book-000 differs from its "
                                                      "recomputation (simmia_star_score)")


def test_a_run_stopped_by_its_budget_resumes_sending_nothing_twice(tmp_path):
    store = ResultsStore(tmp_path / "s.duckdb")
    with FakeChat(KNOWN) as api:
        api.reply = reply
        first = run(api, store, Budget(tokens=600))
        assert first.status == "budget"
        sent = list(api.received)
        second = run(api, store)
        resumed = api.received[len(sent):]
        fresh = run(api, ResultsStore(tmp_path / "fresh.duckdb"))
    assert second.status == "done" and second.run_id == first.run_id
    assert not set(resumed[1:]) & set(sent[1:])  # [0]: each session's probe of the API's tier
    assert second.results.equals(fresh.results)
    assert verify_run(store, second.run_id).fault is None


def test_a_simmia_run_is_replayed_with_its_embedder_and_refused_without_it(tmp_path, monkeypatch):
    monkeypatch.setitem(EMBEDDERS, "toy", ToyEmbedder)
    store = ResultsStore(tmp_path / "s.duckdb")
    with FakeChat(KNOWN) as api:
        api.reply = reply
        outcome = run(api, store, embedding="toy", embedding_sha256=ToyEmbedder.sha256)
    known = outcome.results.iloc[0]
    assert (known.variant, known.embedding, known.embedding_sha256) == ("SimMIA", "toy-sha256-8", ToyEmbedder.sha256)
    assert known.simmia_star_score == pytest.approx(-1 / (N + 2), rel=1e-15)  # the same samples, both variants named
    positions = known.words
    ratios = [p["S_prefix"] / (p["S"] + 1e-11) for p in positions]
    assert [p["r"] for p in positions] == ratios and known.simmia_score == -sum(ratios) / len(ratios)
    assert all(p["S"] == pytest.approx(1.0, rel=1e-12) for p in positions)  # every plain sample is the label
    assert verify_run(store, outcome.run_id).fault is None
    monkeypatch.delitem(EMBEDDERS, "toy")
    assert "no word embedder 'toy' is registered" in verify_run(store, outcome.run_id).fault

"""The chat API model kind: its spec, its client's retries and refusals (each attempt recorded before it is used),
prices and budgets, and the methods it refuses — against a small loopback API (`tests.support.fake_chat`)."""
from __future__ import annotations

import json

import pytest

import mia_core.model.chat.client as client_module
from mia_core.methods import methods_allowed
from mia_core.model.chat.chat_model import connect_chat
from mia_core.model.chat.client import ChatClient, ChatError, ChatGaveUp
from mia_core.model.chat.prices import Budget, BudgetReached, Meter, Prices, parse_budget, prices_for
from mia_core.model.chat.spec import is_chat_spec, parse_chat_spec
from mia_core.model.served.spec import is_served_spec

from tests.support.cli_runner import run_cli
from tests.support.fake_chat import FakeChat

BOOK = " ".join(f"word{i}" for i in range(300))


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(client_module, "BACKOFF_S", 0.01)


def test_a_spec_is_recognised_by_its_api_setting_and_written_canonically():
    spec = "https://api.example.com/v1/?model=gpt-x&api=chat&key_env=MY_KEY&rpm=60&price_in=2&price_out=8"
    assert is_chat_spec(spec) and is_served_spec(spec)  # a URL either way; api= decides the kind
    assert not is_chat_spec("http://127.0.0.1:8000/v1?model=demo")
    parsed = parse_chat_spec(spec)
    assert (parsed.base_url, parsed.model, parsed.key_env, parsed.rpm) == ("https://api.example.com/v1", "gpt-x",
                                                                          "MY_KEY", 60)
    assert parsed.text == ("https://api.example.com/v1?api=chat&model=gpt-x&key_env=MY_KEY&rpm=60&price_in=2.0"
                           "&price_out=8.0")
    assert parse_chat_spec(parsed.text) == parsed


@pytest.mark.parametrize("spec, words", [
    ("https://h/v1?api=chat", "model=NAME"),
    ("https://h/v1?api=chat&model=m&rpn=5", "did you mean 'rpm'"),
    ("https://user:pw@h/v1?api=chat&model=m", "no credentials"),
    ("https://h/v1?api=chat&model=m&key_env=sk-123", "names an environment variable"),
    ("https://h/v1?api=chat&model=m&timeout=0", "timeout= must be from"),
    ("https://h/v1?api=chat&model=m&tier=GL", "GL is found by asking"),
    ("https://h/v1?api=chat&model=m&prices=/nonexistent.toml", "does not exist"),
])
def test_a_bad_spec_is_one_sentence_naming_the_setting(spec, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace("?", r"\?")):
        parse_chat_spec(spec)


def test_the_tier_is_probed_once_and_recorded():
    with FakeChat(BOOK) as api:
        model = connect_chat(api.spec())
        assert model.tier.name == "G"  # this API sends no log-probs back
        assert len(model.probe_exchanges) == 1 and json.loads(model.probe_exchanges[0].request)["logprobs"] is True
        assert model.answered_model == "reciter-2026-01-01"
        allowed = methods_allowed(model)
        assert allowed.allowed == []  # every method reads log-probs or the model's tokens
        assert "returns no log-probs" in allowed.refused["loss"]
        assert "this chat API takes and returns text only" in allowed.refused["samia"]  # sampling needs token prompts


def test_a_refused_key_and_an_unknown_model_are_one_sentence(monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "wrong")
    with FakeChat(BOOK, key="right") as api:
        with pytest.raises(ChatError, match=r"refused the request \(HTTP 401\): check the key in FAKE_KEY"):
            connect_chat(api.spec(key_env="FAKE_KEY"))
        monkeypatch.setenv("FAKE_KEY", "right")
        with pytest.raises(ChatError, match=r"HTTP 404\) \(is model= the provider's name for it\?\)"):
            connect_chat(api.spec(key_env="FAKE_KEY").replace("model=reciter", "model=nope"))
        monkeypatch.delenv("FAKE_KEY")
        with pytest.raises(ChatError, match="FAKE_KEY .* is not set"):
            connect_chat(api.spec(key_env="FAKE_KEY"))


@pytest.mark.parametrize("faults", [
    [(429, {"Retry-After": "0"})], [(429, {})], [(500, {}), (503, {})], [("drop", None)],
])
def test_overload_server_errors_and_dropped_connections_are_retried_each_attempt_recorded(faults):
    with FakeChat(BOOK, key=None) as api:
        client = ChatClient(parse_chat_spec(api.spec()))
        api.faults = list(faults)
        recorded = []
        answer = client.send({"model": "reciter", "messages": [{"role": "user", "content": "x word5 word6 word7"}],
                              "max_tokens": 3}, recorded.append, token_bound=100)
        assert answer.text == "word8 word9 word10"
        assert [e.attempt for e in recorded] == list(range(len(faults) + 1))
        assert [e.status for e in recorded[:-1]] == [None if f[0] == "drop" else f[0] for f in faults]
        assert recorded[-1].status == 200 and len(api.received) == len(faults) + 1
        assert all(e.request == api.received[0] for e in recorded)  # the exact bytes sent, each time


def test_a_server_that_never_recovers_gives_up_after_its_tries():
    with FakeChat(BOOK) as api:
        client = ChatClient(parse_chat_spec(api.spec(retries=2)))
        api.faults = [(500, {})] * 5
        recorded = []
        with pytest.raises(ChatGaveUp, match="did not answer usably in 3 tries"):
            client.send({"model": "reciter", "messages": [{"role": "user", "content": "x"}]}, recorded.append,
                        token_bound=10)
        assert len(recorded) == 3


def test_a_non_json_answer_is_refused_not_read_as_empty():
    with FakeChat(BOOK) as api:
        client = ChatClient(parse_chat_spec(api.spec()))
        api.faults = [("not-json", None)]
        recorded = []
        with pytest.raises(ChatError, match="cannot read: the answer is not JSON"):
            client.send({"model": "reciter", "messages": [{"role": "user", "content": "x"}]}, recorded.append,
                        token_bound=10)
        assert recorded[0].response == b"<html>gateway</html>"


def test_the_key_is_in_no_recorded_byte(monkeypatch):
    monkeypatch.setenv("FAKE_KEY", "sk-very-secret")
    with FakeChat(BOOK, key="sk-very-secret") as api:
        model = connect_chat(api.spec(key_env="FAKE_KEY"))
        recorded = []
        model.client.send({"model": "reciter", "messages": [{"role": "user", "content": "word1 word2 word3"}],
                           "max_tokens": 2}, recorded.append, token_bound=50)
        for exchange in model.probe_exchanges + recorded:
            assert b"sk-very-secret" not in exchange.request + exchange.response + exchange.url.encode()
        assert "sk-very-secret" not in model.spec + repr(model)


def test_budgets_in_words():
    assert parse_budget("$5") == Budget(dollars=5.0)
    assert parse_budget("2.5 usd") == Budget(dollars=2.5)
    assert parse_budget("2M tokens") == Budget(tokens=2_000_000)
    assert parse_budget("1500 tok") == Budget(tokens=1500)
    for bad in ("five dollars", "$0", "-3", "0 tokens"):
        with pytest.raises(ValueError):
            parse_budget(bad)


def test_the_meter_stops_before_a_request_that_could_pass_the_budget():
    prices = Prices(2.0, 8.0)
    meter = Meter(prices, Budget(dollars=0.01))
    meter.add(1000, 500)  # $0.002 + $0.004
    assert meter.spent.dollars == pytest.approx((1000 * 2 + 500 * 8) / 1e6)
    held = meter.reserve(1000, 250)  # +$0.004 → $0.010: not past the budget
    with pytest.raises(BudgetReached, match=r"the budget of \$0.01 is reached"):
        meter.reserve(1, 0)  # what the first holds counts: two requests at once cannot pass it together
    meter.settle(held, 500, 100)  # it used less: $0.0018
    assert meter.spent.dollars == pytest.approx(0.006 + 0.0018) and meter.spent.requests == 2
    with pytest.raises(BudgetReached):
        meter.reserve(1000, 26)  # $0.002208 > the $0.0022 left
    meter.release(meter.reserve(1000, 24))
    with pytest.raises(ValueError, match="needs the API's prices"):
        Meter(Prices(None, None), Budget(dollars=1.0))
    tokens = Meter(Prices(None, None), Budget(tokens=100))
    tokens.add(60, 30)
    tokens.release(tokens.reserve(5, 5))
    with pytest.raises(BudgetReached):
        tokens.reserve(5, 6)


def test_a_price_table_fills_what_the_spec_does_not_give(tmp_path):
    table = tmp_path / "prices.toml"
    table.write_text('date = "2026-11-01"\n[models."gpt-x"]\ninput = 2.0\noutput = 8.0\n')
    spec = parse_chat_spec(f"https://h/v1?api=chat&model=gpt-x&prices={table}&price_out=9")
    prices = prices_for(spec)
    assert (prices.input_per_m, prices.output_per_m, prices.date) == (2.0, 9.0, "2026-11-01")
    assert prices_for(parse_chat_spec(f"https://h/v1?api=chat&model=other&prices={table}")).known is False
    table.write_text('[models."gpt-x"]\ninput = "two"\noutput = 8\n')
    with pytest.raises(ValueError, match="models.'gpt-x'.input must be a price"):
        prices_for(spec)


def test_mia_models_check_says_what_a_chat_api_is_and_refuses():
    with FakeChat(BOOK) as api:
        code, out, err = run_cli("models", "check", api.spec(price_in=2, price_out=8))
    assert code == 0, err
    assert "model (answered)  reciter-2026-01-01" in out and "tier              G (no log-probs" in out
    assert "reciter allows 0 of" in out and "this chat API returns no log-probs" in out

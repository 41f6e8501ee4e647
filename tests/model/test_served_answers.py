"""The served client checks what a server answers before anything uses or caches it: impossible log-probs (NaN,
infinities, above 0), ranks below 1, a row too many, a "distribution" summing above 1 and values of the wrong type
are refused in one sentence naming the position and the value; a refused answer leaves nothing in the statistics
cache; `timeout=` is a deadline for the whole answer (a server dripping bytes is cut off); the answer-size bound is
kept while the body streams in. Against `tests.support.fake_served`, a real HTTP server on loopback that lies."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest

from mia_core.model.served import http
from mia_core.model.served.http import Client, ServedError
from mia_core.model.served.served_model import connect
from mia_core.model.served.shapes import parse_echo, parse_sglang, parse_vllm, vllm_request
from mia_core.model.served.spec import parse_served_spec
from mia_core.model.stats_cache import StatsCache

from tests.support.cli_runner import run_cli
from tests.support.fake_served import FakeServed, chunked, drip, honest_answer
from tests.support.tiny import tiny_tokenizer

TEXT = "the river castle engine was built by the merchant in the north."


@pytest.fixture
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture
def server(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))  # the identity records of this test alone
    with FakeServed(tokenizer) as fake:
        yield fake


def served(server: FakeServed, tokenizer, settings: str = "", tmp_path=None):
    """A connected `ServedModel` on the fake server (its statistics cache in `tmp_path` when given)."""
    cache = StatsCache(tmp_path / "stats") if tmp_path is not None else None
    return connect(server.spec(settings), lambda source: tokenizer, stats_cache=cache)


def set_true_logprob(j: int, value):
    """A lie: the prompt token's log-prob at position `j` is `value`."""
    def lie(answer: dict, ids: list[int]) -> dict:
        answer["choices"][0]["prompt_logprobs"][j][str(ids[j])]["logprob"] = value
        return answer
    return lie


# 1. impossible log-probs ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (3.5, "3.5"),
                                          (1e-3, "0.001")])
def test_impossible_logprobs_are_refused_naming_the_position_and_value(server, tokenizer, value, shown):
    model = served(server, tokenizer)
    server.lie = set_true_logprob(3, value)
    with pytest.raises(ServedError, match=rf"position 3: logprob of token \d+ is {shown}, not a log-probability"):
        model.token_stats([TEXT], cache=False)


def test_zero_and_float_rounding_above_zero_are_read_as_zero(server, tokenizer):
    model = served(server, tokenizer)
    lies = [set_true_logprob(3, 0.0), set_true_logprob(4, 5e-7)]
    server.lie = lambda answer, ids: lies[1](lies[0](answer, ids), ids)
    stats = model.token_stats([TEXT], cache=False)[0]
    assert np.isfinite(stats.logprob).all() and (stats.logprob <= 0).all()
    assert (stats.logprob == 0).sum() >= 2


def test_a_lying_server_is_one_error_line_and_exit_2(server, tokenizer, tmp_path):
    folder = tmp_path / "tok"
    tokenizer.save_pretrained(folder)
    (tmp_path / "in.txt").write_text(TEXT)
    server.lie = set_true_logprob(3, math.nan)
    code, _, err = run_cli("score", "--model", server.spec(f"tokenizer={folder}"), "--input", tmp_path / "in.txt",
                           "--output", tmp_path / "out.csv", "--methods", "loss")
    assert code == 2 and not (tmp_path / "out.csv").exists()
    errors = [line for line in err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "position 3" in errors[0] and "nan" in errors[0] and "Traceback" not in err


@pytest.mark.parametrize("rank, message", [(0, "rank of token \\d+ is 0, not 1 or more"),
                                           (-2, "rank of token \\d+ is -2, not 1 or more"),
                                           ("1", "rank of token \\d+ is '1', not a whole number"),
                                           (1.5, "rank of token \\d+ is 1.5, not a whole number")])
def test_a_rank_below_1_or_not_a_whole_number_is_refused(server, tokenizer, rank, message):
    model = served(server, tokenizer)

    def lie(answer: dict, ids: list[int]) -> dict:
        answer["choices"][0]["prompt_logprobs"][2][str(ids[2])]["rank"] = rank
        return answer
    server.lie = lie
    with pytest.raises(ServedError, match=f"position 2: {message}"):
        model.token_stats([TEXT], cache=False)


# 2. the row count, and the whole distribution ------------------------------------------------------------------------

def test_one_row_too_many_with_the_whole_distribution_is_refused(server, tokenizer):
    model = served(server, tokenizer, "logprobs=full")
    assert np.isfinite(model.token_stats([TEXT], cache=False)[0].mu).all()  # the honest answer passes
    server.lie = lambda answer, ids: (answer["choices"][0]["prompt_logprobs"].append(
        answer["choices"][0]["prompt_logprobs"][-1]), answer)[1]
    with pytest.raises(ServedError, match=r"returned (\d+) rows of prompt log-probs for a prompt of \d+ tokens"):
        model.token_stats([TEXT], cache=False)


def test_rows_are_one_a_prompt_token_in_the_parser():
    ids = [0, 7, 3, 41, 9]
    answer = honest_answer(ids, -1, 50)
    assert np.isfinite(parse_vllm(answer, ids, 1, 50)["mu"]).all()
    answer["choices"][0]["prompt_logprobs"].append(answer["choices"][0]["prompt_logprobs"][-1])
    with pytest.raises(ServedError, match="6 rows of prompt log-probs for a prompt of 5 tokens"):
        parse_vllm(answer, ids, 1, 50)


def test_a_distribution_summing_above_1_is_refused(server, tokenizer):
    model = served(server, tokenizer, "logprobs=full")

    def lie(answer: dict, ids: list[int]) -> dict:
        for entry in answer["choices"][0]["prompt_logprobs"][5].values():
            entry["logprob"] = math.log(1 / 200)  # 300 tokens at 1/200 each: 1.5 in all
        return answer
    server.lie = lie
    with pytest.raises(ServedError, match=r"position 5: its 300 probabilities sum to 1\.5, more than 1"):
        model.token_stats([TEXT], cache=False)


# 6. values of the wrong type ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, shown", [("abc", "'abc'"), (None, "None"), ({}, "{}"), (True, "True")])
def test_a_value_of_the_wrong_type_says_what_the_server_sent_where(server, tokenizer, value, shown):
    model = served(server, tokenizer)
    server.lie = set_true_logprob(3, value)
    with pytest.raises(ServedError, match=rf"position 3: logprob of token \d+ is {shown}, not a number"):
        model.token_stats([TEXT], cache=False)


def test_entries_of_the_wrong_shape_say_what_the_server_sent_where():
    ids = [0, 7, 3, 41]
    answer = honest_answer(ids, 1, 50)
    answer["choices"][0]["prompt_logprobs"][2] = {"3": "abc"}
    with pytest.raises(ServedError, match=r"position 2: the entry of token 3 is 'abc', not a mapping with a logprob"):
        parse_vllm(answer, ids, 1, 0)
    answer["choices"][0]["prompt_logprobs"][2] = [1, 2]
    with pytest.raises(ServedError, match=r"position 2: the log-probs are \[1, 2\], not a mapping"):
        parse_vllm(answer, ids, 1, 0)
    with pytest.raises(ServedError, match="'abc' as choices\\[0\\], not a mapping"):
        parse_vllm({"choices": ["abc"]}, ids, 1, 0)


def test_sglang_and_echo_answers_are_checked_the_same_way():
    ids = [0, 7, 3]
    tokens = [[None, 0, None], [-0.5, 7, None], ["abc", 3, None]]
    with pytest.raises(ServedError, match="position 2: logprob is 'abc', not a number"):
        parse_sglang({"meta_info": {"input_token_logprobs": tokens}}, ids, 1, 0)
    tokens[2][0] = 2.0
    with pytest.raises(ServedError, match="position 2: logprob is 2.0, not a log-probability"):
        parse_sglang({"meta_info": {"input_token_logprobs": tokens}}, ids, 1, 0)
    tokens[2] = [-0.1, None]
    with pytest.raises(ServedError, match="position 2: the token id is None, not a whole number"):
        parse_sglang({"meta_info": {"input_token_logprobs": tokens}}, ids, 1, 0)
    echo = {"choices": [{"logprobs": {"token_logprobs": [None, -0.2, math.nan, -0.1]}}]}
    with pytest.raises(ServedError, match="position 2: logprob is nan, not a log-probability"):
        parse_echo(echo, ids, 1, 0)
    echo["choices"][0]["logprobs"]["token_logprobs"] = [None, -0.2, -0.3, -0.1, -0.1]
    with pytest.raises(ServedError, match="echoed 5 log-probs for a prompt of 3 tokens"):
        parse_echo(echo, ids, 1, 0)


# 3. the statistics cache ---------------------------------------------------------------------------------------------

def test_a_refused_answer_leaves_nothing_in_the_cache_for_an_honest_server(server, tokenizer, tmp_path):
    liar = served(server, tokenizer, tmp_path=tmp_path)
    server.lie = set_true_logprob(3, math.nan)  # the identity probe was honest: the same fingerprint as below
    with pytest.raises(ServedError, match="position 3"):
        liar.token_stats([TEXT])
    assert liar.stats_cache.usage().entries == 0
    server.lie = None
    honest = served(server, tokenizer, tmp_path=tmp_path)
    assert honest.fingerprint == liar.fingerprint
    stats = honest.token_stats([TEXT])[0]
    assert np.isfinite(stats.logprob).all()
    assert honest.stats_cache.usage().entries == 1


# 4. the deadline -----------------------------------------------------------------------------------------------------

def test_a_server_dripping_bytes_is_cut_off_at_the_deadline(server):
    server.lie = lambda answer, ids: {"padding": "x" * 20}  # ~35 bytes: 9 s at one byte every 0.25 s
    server.write = drip(0.25)
    client = Client(parse_served_spec(f"{server.url}/v1?timeout=1&retries=0"))
    started = time.monotonic()
    with pytest.raises(ServedError, match="did not answer /completions within 1 s"):
        client.post(*vllm_request("fake", [0, 1, 2], 1))
    assert time.monotonic() - started < 3
    assert server.sent < 10  # about 1 s of it was read


# 5. the answer-size bound ----------------------------------------------------------------------------------------------

BOUND = 256 << 10


@pytest.mark.parametrize("declare", [False, True], ids=["chunked", "content-length"])
def test_an_answer_above_the_bound_is_dropped_as_it_streams_in(server, monkeypatch, declare):
    monkeypatch.setattr(http, "MAX_ANSWER_BYTES", BOUND)
    server.write = chunked(16 << 10, pad_to=16 << 20, pause_s=0.001, declare=declare)
    client = Client(parse_served_spec(f"{server.url}/v1?timeout=30&retries=0"))
    with pytest.raises(ServedError, match=r"answered /completions with more than 0\.25 MB"):
        client.post(*vllm_request("fake", [0, 1, 2], 1))
    time.sleep(0.2)  # the server's next write after the client hung up fails
    assert server.sent < (BOUND if declare else 2 * BOUND) + (1 << 20)

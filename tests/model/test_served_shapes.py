"""The served answer parsers read each server's documented shape into the statistics an in-process pass yields:
checked against distributions built here (float64 softmax of random logits), in vLLM's, SGLang's and the legacy echo
shapes."""
from __future__ import annotations

import numpy as np
import pytest

from mia_core.model.served.http import ServedError
from mia_core.model.served.shapes import parse_echo, parse_sglang, parse_vllm

from tests.support.fake_served import vllm_answer

VOCAB = 50


def _distributions(n_positions: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 3, (n_positions, VOCAB))
    return logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))  # float64 log-softmax


IDS = [0, 7, 3, 41, 9, 9, 22]


def test_vllm_top_mode_gives_logprob_rank_and_top1():
    logp = _distributions(len(IDS))
    stats = parse_vllm(vllm_answer(IDS, logp, 1), IDS, 1, 0)
    for row, j in enumerate(range(1, len(IDS))):
        assert stats["logprob"][row] == pytest.approx(logp[j, IDS[j]], abs=1e-6)
        assert stats["rank"][row] == 1 + (logp[j] > logp[j, IDS[j]]).sum()
        assert stats["top1_id"][row] == np.argmax(logp[j])
        assert stats["top1_logprob"][row] == pytest.approx(logp[j].max(), abs=1e-6)
    assert np.isnan(stats["mu"]).all() and np.isnan(stats["sigma"]).all()  # not asked for: absent, not guessed


def test_vllm_full_mode_moments_equal_the_softmax_moments():
    logp = _distributions(len(IDS), seed=3)
    stats = parse_vllm(vllm_answer(IDS, logp, -1), IDS, 2, VOCAB)  # a window scoring from position 2
    assert len(stats["logprob"]) == len(IDS) - 2
    for row, j in enumerate(range(2, len(IDS))):
        p = np.exp(logp[j])
        mu = (p * logp[j]).sum()
        sigma = np.sqrt((p * (logp[j] - mu) ** 2).sum())
        assert stats["mu"][row] == pytest.approx(mu, abs=1e-5)
        assert stats["sigma"][row] == pytest.approx(sigma, abs=1e-5)
        assert stats["entropy"][row] == pytest.approx(-mu, abs=1e-5)


def test_vllm_full_mode_refuses_a_truncated_distribution():
    logp = _distributions(len(IDS))
    with pytest.raises(ServedError, match="not the whole vocabulary"):
        parse_vllm(vllm_answer(IDS, logp, 20), IDS, 1, VOCAB)


def test_vllm_answer_without_the_prompt_token_is_an_error():
    logp = _distributions(len(IDS))
    answer = vllm_answer(IDS, logp, 1)
    answer["choices"][0]["prompt_logprobs"][3] = {"1": {"logprob": -0.1, "rank": 1}}
    with pytest.raises(ServedError, match="lack the prompt's own token 41"):
        parse_vllm(answer, IDS, 1, 0)
    with pytest.raises(ServedError, match="no prompt log-probs"):
        parse_vllm({"choices": [{"text": "x"}]}, IDS, 1, 0)


def test_sglang_input_token_logprobs():
    logp = _distributions(len(IDS), seed=5)
    tokens = [[None, IDS[0], None]] + [[float(logp[j, IDS[j]]), IDS[j], None] for j in range(1, len(IDS))]
    tops = [None] + [[[float(logp[j].max()), int(np.argmax(logp[j])), None]] for j in range(1, len(IDS))]
    stats = parse_sglang({"text": "", "meta_info": {"input_token_logprobs": tokens, "input_top_logprobs": tops}},
                         IDS, 1, 0)
    np.testing.assert_allclose(stats["logprob"], [logp[j, IDS[j]] for j in range(1, len(IDS))], atol=1e-6)
    np.testing.assert_array_equal(stats["top1_id"], [np.argmax(logp[j]) for j in range(1, len(IDS))])
    tokens[2][1] = 999
    with pytest.raises(ServedError, match="for token 999"):
        parse_sglang({"meta_info": {"input_token_logprobs": tokens}}, IDS, 1, 0)


def test_echo_token_logprobs_and_what_it_leaves_out():
    logp = _distributions(len(IDS), seed=7)
    values = [None] + [float(logp[j, IDS[j]]) for j in range(1, len(IDS))] + [-0.3]  # + the generated token
    answer = {"choices": [{"logprobs": {"tokens": ["a"] * (len(IDS) + 1), "token_logprobs": values,
                                        "top_logprobs": [None] + [{"a": -0.1}] * len(IDS)}}]}
    stats = parse_echo(answer, IDS, 1, 0)
    np.testing.assert_allclose(stats["logprob"], values[1:len(IDS)], atol=1e-6)
    assert (stats["rank"] == -1).all() and (stats["top1_id"] == -1).all()  # strings cannot be matched to ids
    with pytest.raises(ServedError, match="did not echo"):
        parse_echo({"choices": [{"logprobs": None}]}, IDS, 1, 0)

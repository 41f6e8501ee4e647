"""The requests that ask a server for a prompt's log-probs, and the parsers of their answers, one per server shape.

Each parser returns the statistics of positions `score_from … len(ids)-1` of the prompt `ids` (the log-prob of
`ids[j]` given `ids[:j]`) as the arrays an in-process pass yields (`FLOAT_STATS`, `INT_STATS`); what a server does not
return is NaN (floats) or -1 (ids, ranks), and the model's `access` keeps every method that would read it away.

- vLLM (`/v1/completions`, `prompt_logprobs`): per position {token id: {logprob, rank, decoded_token}}, the true token
  always among them, with its rank in the whole vocabulary; k = -1 returns every token (the full distribution).
- SGLang (`/generate`, `return_logprob`, `logprob_start_len: 0`): `meta_info.input_token_logprobs` as
  [logprob, token id, text] per prompt token (the first logprob null), `input_top_logprobs` the top k of each.
- Legacy `echo` (`/v1/completions` with `echo: true, logprobs: k`; llama-cpp-python, Together): `token_logprobs`
  per prompt token, top-k keyed by token *strings*: only the true token's log-prob is read.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..forward import FLOAT_STATS, INT_STATS
from .http import ServedError

Stats = dict[str, np.ndarray]


def vllm_request(model: str, ids: Sequence[int], k: int) -> tuple[str, dict]:
    """(endpoint, body) asking vLLM for the prompt's log-probs: the true token's and the top `k` (-1: all)."""
    return "/completions", {"model": model, "prompt": [int(i) for i in ids], "max_tokens": 1, "temperature": 0.0,
                            "prompt_logprobs": k}


def sglang_request(model: str, ids: Sequence[int], k: int) -> tuple[str, dict]:
    """(endpoint, body) asking SGLang's native `/generate` for the prompt's log-probs and the top `k`."""
    return "//generate", {"input_ids": [int(i) for i in ids], "return_logprob": True, "logprob_start_len": 0,
                          "top_logprobs_num": max(k, 1), "sampling_params": {"max_new_tokens": 1, "temperature": 0.0}}


def echo_request(model: str, ids: Sequence[int], k: int) -> tuple[str, dict]:
    """(endpoint, body) of the legacy completions shape that echoes the prompt with its log-probs."""
    return "/completions", {"model": model, "prompt": [int(i) for i in ids], "max_tokens": 1, "temperature": 0.0,
                            "echo": True, "logprobs": max(k, 1)}


def _empty(n: int) -> Stats:
    stats = {name: np.full(n, np.nan, np.float32) for name in FLOAT_STATS}
    stats.update({name: np.full(n, -1, np.int64) for name in INT_STATS})
    return stats


def token_id(key: str) -> int:
    """A token id from a log-probs key: "123", or "token_id:123" (vLLM's `--return-tokens-as-token-ids` strings)."""
    try:
        return int(key.rsplit(":", 1)[-1])
    except ValueError:
        raise ServedError(f"the server keyed a log-prob by {key[:40]!r}, not a token id") from None


def first_choice(answer: Any) -> dict:
    try:
        return answer["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise ServedError("the server's answer has no choices[0]: not an OpenAI-style completion") from None


def parse_vllm(answer: Any, ids: Sequence[int], score_from: int, full: int) -> Stats:
    """Statistics from vLLM's `prompt_logprobs` (see the module docstring); `full` > 0 is the vocabulary size when the
    whole distribution was asked for (μ, σ and the entropy are then computed from it)."""
    rows = first_choice(answer).get("prompt_logprobs")
    if not isinstance(rows, list) or len(rows) < len(ids):
        raise ServedError("the server returned no prompt log-probs for the prompt (prompt_logprobs): is it vLLM, and "
                          f"does it allow them (--max-logprobs)? got {type(rows).__name__} of {len(rows or [])} rows "
                          f"for {len(ids)} tokens")
    n = len(ids) - score_from
    out = _empty(n)
    for row, j in enumerate(range(score_from, len(ids))):
        entries = rows[j]
        if not isinstance(entries, dict):
            raise ServedError(f"prompt log-probs of position {j} are {type(entries).__name__}, not a mapping")
        by_id = {token_id(key): value for key, value in entries.items()}
        true = by_id.get(int(ids[j]))
        if true is None:
            raise ServedError(f"the server's prompt log-probs at position {j} lack the prompt's own token {ids[j]}: "
                              "were the token ids changed (a tokenizer or a chat template)?")
        out["logprob"][row] = true["logprob"]
        out["rank"][row] = true.get("rank") if true.get("rank") is not None else -1
        best_id, best = max(by_id.items(), key=lambda item: item[1]["logprob"])
        if full or out["rank"][row] == 1 or any(v.get("rank") == 1 for v in by_id.values()):
            out["top1_id"][row], out["top1_logprob"][row] = best_id, best["logprob"]
        if full:
            if len(by_id) < full:
                raise ServedError(f"the server returned {len(by_id)} log-probs at position {j}, not the whole "
                                  f"vocabulary ({full}): start vLLM with --max-logprobs -1")
            mu, sigma = distribution_moments(np.fromiter((v["logprob"] for v in by_id.values()), np.float64, len(by_id)))
            out["mu"][row], out["sigma"][row], out["entropy"][row] = mu, sigma, -mu
    return out


def distribution_moments(logprobs: np.ndarray) -> tuple[float, float]:
    """(μ, σ) of log p under p over a whole vocabulary's log-probs, in float64 (Min-K%++'s statistics)."""
    p = np.exp(logprobs)
    p = p / p.sum()  # the server's log-probs are rounded: renormalise the weights (not the log-probs)
    mu = float(np.dot(p, logprobs))
    return mu, float(np.sqrt(max(np.dot(p, (logprobs - mu) ** 2), 0.0)))


def parse_sglang(answer: Any, ids: Sequence[int], score_from: int, full: int) -> Stats:
    """Statistics from SGLang's `meta_info.input_token_logprobs` / `input_top_logprobs`."""
    meta = answer.get("meta_info") if isinstance(answer, dict) else None
    tokens = meta.get("input_token_logprobs") if isinstance(meta, dict) else None
    if not isinstance(tokens, list) or len(tokens) < len(ids):
        raise ServedError("the server's answer has no meta_info.input_token_logprobs for every prompt token: is it "
                          "SGLang's /generate with return_logprob?")
    tops = meta.get("input_top_logprobs") or [None] * len(tokens)
    out = _empty(len(ids) - score_from)
    for row, j in enumerate(range(score_from, len(ids))):
        logprob, given_id = tokens[j][0], tokens[j][1]
        if given_id != ids[j] or logprob is None:
            raise ServedError(f"SGLang's input log-probs at position {j} are for token {given_id}, not the prompt's "
                              f"{ids[j]}")
        out["logprob"][row] = logprob
        top = tops[j] if j < len(tops) else None
        if top:
            best = max(top, key=lambda entry: entry[0])
            out["top1_id"][row], out["top1_logprob"][row] = best[1], best[0]
            if best[1] == ids[j]:
                out["rank"][row] = 1
    return out


def parse_echo(answer: Any, ids: Sequence[int], score_from: int, full: int) -> Stats:
    """The true tokens' log-probs from a legacy echo answer (`logprobs.token_logprobs`)."""
    logprobs = first_choice(answer).get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(values, list) or len(values) < len(ids):
        raise ServedError("the server did not echo the prompt's log-probs (logprobs.token_logprobs): it needs the "
                          "legacy completions shape with echo (llama-cpp-python: start it with logits_all)")
    out = _empty(len(ids) - score_from)
    for row, j in enumerate(range(score_from, len(ids))):
        if values[j] is None:
            raise ServedError(f"the echoed log-prob of prompt token {j} is null")
        out["logprob"][row] = values[j]
    return out


#: Per API: (request builder, parser).
SHAPES = {"vllm": (vllm_request, parse_vllm), "sglang": (sglang_request, parse_sglang),
          "echo": (echo_request, parse_echo)}

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

Nothing a server says is used before it is checked (`checked_logprobs`, `checked_ranks`): every log-prob read is a
number, finite and at most 0 (`POSITIVE_SLACK` above 0 is read as 0); every rank given a whole number ≥ 1; vLLM's
answer has one row per prompt token (the first None), each scored row holds its position's own token, and a whole
distribution (`logprobs=full`) lists every token id once with probabilities summing to at most 1 + `SUM_TOLERANCE`.
Anything else is a `ServedError` naming the position and the value, raised before the statistics exist, so a lying
answer never reaches the statistics cache.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..forward import FLOAT_STATS, INT_STATS
from .http import ServedError

Stats = dict[str, np.ndarray]

#: A log-prob above 0 is a probability above 1. vLLM's float32 log-softmax cannot give one (x − max − log Σ exp(x − max),
#: the sum ≥ 1 exactly, so the top token's is 0.0 exactly); a server that computes log Σ exp another way may round it
#: up by a float32 ulp of a value near 0 (< 1e-7): up to this much is read as 0, more is refused.
POSITIVE_SLACK = 1e-6
#: A whole distribution's probabilities (float32 log-probs, summed in float64) add up to 1 within ~1e-6 (the float32
#: rounding of log Σ exp); more than 1 + this is refused.
SUM_TOLERANCE = 1e-3


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
    """The answer's `choices[0]` (a mapping), or a ServedError."""
    try:
        choice = answer["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise ServedError("the server's answer has no choices[0]: not an OpenAI-style completion") from None
    if not isinstance(choice, dict):
        raise ServedError(f"the server's answer has {_shown(choice)} as choices[0], not a mapping: not an "
                          "OpenAI-style completion")
    return choice


def _shown(value: Any) -> str:
    """A value the server sent, as the user reads it in an error (short)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _at(j: int) -> str:
    return f"the server's answer for position {j}"


def checked_logprob(value: Any, j: int, what: str = "logprob") -> float:
    """One log-prob the server sent for position `j`: a finite number ≤ 0 (`POSITIVE_SLACK` above 0 read as 0), else
    a ServedError that names the position and the value."""
    if type(value) not in (int, float):  # bool, str, None, lists and mappings are not log-probs
        raise ServedError(f"{_at(j)}: {what} is {_shown(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float64
        number = math.inf
    if not math.isfinite(number) or number > POSITIVE_SLACK:
        raise ServedError(f"{_at(j)}: {what} is {_shown(value)}, not a log-probability (a finite number at most 0)")
    return min(number, 0.0)


def checked_logprobs(values: list, j: int, names: Sequence[int]) -> np.ndarray:
    """Log-probs of the tokens `names` at position `j`, checked as `checked_logprob` does, as float64 (vectorised: a
    whole distribution is 50,000–250,000 of them)."""
    try:
        if {type(v) for v in values} <= {int, float}:
            array = np.array(values, np.float64)
            if (np.isfinite(array) & (array <= POSITIVE_SLACK)).all():
                return np.minimum(array, 0.0)
    except OverflowError:  # an integer beyond float64: found below
        pass
    for value, name in zip(values, names):
        checked_logprob(value, j, f"logprob of token {name}")
    raise AssertionError("unreachable: a value failed the vectorised check and none failed the scalar one")


def checked_rank(value: Any, j: int, what: str = "rank") -> int:
    """A rank the server sent for position `j`: a whole number ≥ 1, or -1 when it gave none (None or absent)."""
    if value is None:
        return -1
    if type(value) is not int:
        raise ServedError(f"{_at(j)}: {what} is {_shown(value)}, not a whole number")
    if value < 1:
        raise ServedError(f"{_at(j)}: {what} is {value}, not 1 or more (ranks count from 1)")
    return value


def checked_ranks(values: list, j: int, names: Sequence[int]) -> list[int]:
    """Ranks of the tokens `names` at position `j` (-1 where none is given), checked as `checked_rank` does."""
    if {type(v) for v in values} <= {int} and (not values or min(values) >= 1):
        return values
    return [checked_rank(value, j, f"rank of token {name}") for value, name in zip(values, names)]


def vllm_row(entries: Any, j: int) -> tuple[list[int], np.ndarray, list[int]]:
    """One position's vLLM prompt log-probs, checked: (token ids, their log-probs (float64), their ranks (-1: none
    given))."""
    if not isinstance(entries, dict):
        raise ServedError(f"{_at(j)}: the log-probs are {_shown(entries)}, not a mapping of token ids")
    names = [token_id(key) for key in entries]
    values = list(entries.values())
    try:
        logprobs = [value["logprob"] for value in values]
        ranks = [value.get("rank") for value in values]
    except (TypeError, KeyError, AttributeError):
        name, value = next((n, v) for n, v in zip(names, values) if not (isinstance(v, dict) and "logprob" in v))
        raise ServedError(f"{_at(j)}: the entry of token {name} is {_shown(value)}, not a mapping with a "
                          "logprob") from None
    return names, checked_logprobs(logprobs, j, names), checked_ranks(ranks, j, names)


def parse_vllm(answer: Any, ids: Sequence[int], score_from: int, full: int) -> Stats:
    """Statistics from vLLM's `prompt_logprobs` (see the module docstring); `full` > 0 is the vocabulary size when the
    whole distribution was asked for (μ, σ and the entropy are then computed from it)."""
    rows = first_choice(answer).get("prompt_logprobs")
    if not isinstance(rows, list) or len(rows) < len(ids):
        raise ServedError("the server returned no prompt log-probs for the prompt (prompt_logprobs): is it vLLM, and "
                          "does it allow them (--max-logprobs)? got "
                          f"{type(rows).__name__} of {len(rows) if isinstance(rows, list) else 0} rows for "
                          f"{len(ids)} tokens")
    check_row_count(rows, ids, "prompt")
    n = len(ids) - score_from
    out = _empty(n)
    for row, j in enumerate(range(score_from, len(ids))):
        names, logprobs, ranks = vllm_row(rows[j], j)
        at = _position_of(names, int(ids[j]), j)
        out["logprob"][row], out["rank"][row] = logprobs[at], ranks[at]
        best = int(np.argmax(logprobs))
        if full or ranks[at] == 1 or 1 in ranks:
            out["top1_id"][row], out["top1_logprob"][row] = names[best], logprobs[best]
        if full:
            _check_distribution(names, logprobs, j, full)
            mu, sigma = distribution_moments(logprobs)
            out["mu"][row], out["sigma"][row], out["entropy"][row] = mu, sigma, -mu
    return out


def check_row_count(rows: list, ids: Sequence[int], what: str) -> None:
    """vLLM's prompt log-probs hold one row per token of the `what` ("prompt", "window"), no more: else a ServedError
    (a row too many would shift every position's statistics)."""
    if len(rows) != len(ids):
        raise ServedError(f"the server returned {len(rows)} rows of prompt log-probs for a {what} of {len(ids)} "
                          f"tokens: one a {what} token, no more")


def _position_of(names: list[int], true_id: int, j: int) -> int:
    """Where the prompt's own token is among a row's token ids, or a ServedError."""
    try:
        return names.index(true_id)
    except ValueError:
        raise ServedError(f"the server's prompt log-probs at position {j} lack the prompt's own token {true_id}: "
                          "were the token ids changed (a tokenizer or a chat template)?") from None


def _check_distribution(names: list[int], logprobs: np.ndarray, j: int, full: int) -> None:
    """A whole distribution lists every token of the vocabulary (`full`) once, its probabilities summing to ≤ 1."""
    if len(set(names)) < full:
        raise ServedError(f"the server returned {len(set(names))} log-probs at position {j}, not the whole "
                          f"vocabulary ({full}): start vLLM with --max-logprobs -1")
    total = float(np.exp(logprobs).sum())
    if total > 1.0 + SUM_TOLERANCE:
        raise ServedError(f"{_at(j)}: its {len(names)} probabilities sum to {total:.6g}, more than 1: not a "
                          "distribution")


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
    if len(tokens) > len(ids) + 1:  # the prompt's tokens, and at most the one generated
        raise ServedError(f"the server returned {len(tokens)} input log-probs for a prompt of {len(ids)} tokens")
    tops = meta.get("input_top_logprobs") or [None] * len(tokens)
    if not isinstance(tops, list):
        raise ServedError(f"the server's input_top_logprobs are {_shown(tops)}, not a list")
    out = _empty(len(ids) - score_from)
    for row, j in enumerate(range(score_from, len(ids))):
        logprob, given_id = _sglang_entry(tokens[j], j)
        if given_id != ids[j]:
            raise ServedError(f"SGLang's input log-probs at position {j} are for token {given_id}, not the prompt's "
                              f"{ids[j]}")
        out["logprob"][row] = checked_logprob(logprob, j)
        top = tops[j] if j < len(tops) else None
        if top:
            if not isinstance(top, list):
                raise ServedError(f"{_at(j)}: the top log-probs are {_shown(top)}, not a list")
            best_logprob, best_id = max((_sglang_entry(entry, j) for entry in top), key=lambda entry: entry[0])
            out["top1_id"][row], out["top1_logprob"][row] = best_id, best_logprob
            if best_id == ids[j]:
                out["rank"][row] = 1
    return out


def _sglang_entry(entry: Any, j: int) -> tuple[float, int]:
    """(log-prob, token id) of one SGLang [logprob, token id, text] entry at position `j`, checked."""
    if not isinstance(entry, list) or len(entry) < 2:
        raise ServedError(f"{_at(j)}: {_shown(entry)} is not a [logprob, token id, text] entry")
    if type(entry[1]) is not int:
        raise ServedError(f"{_at(j)}: the token id is {_shown(entry[1])}, not a whole number")
    return checked_logprob(entry[0], j), entry[1]


def parse_echo(answer: Any, ids: Sequence[int], score_from: int, full: int) -> Stats:
    """The true tokens' log-probs from a legacy echo answer (`logprobs.token_logprobs`)."""
    logprobs = first_choice(answer).get("logprobs")
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    if not isinstance(values, list) or len(values) < len(ids):
        raise ServedError("the server did not echo the prompt's log-probs (logprobs.token_logprobs): it needs the "
                          "legacy completions shape with echo (llama-cpp-python: start it with logits_all)")
    if len(values) > len(ids) + 1:  # the echoed prompt, and at most the one generated token
        raise ServedError(f"the server echoed {len(values)} log-probs for a prompt of {len(ids)} tokens")
    out = _empty(len(ids) - score_from)
    for row, j in enumerate(range(score_from, len(ids))):
        if values[j] is None:
            raise ServedError(f"the echoed log-prob of prompt token {j} is null")
        out["logprob"][row] = checked_logprob(values[j], j)
    return out


#: Per API: (request builder, parser).
SHAPES = {"vllm": (vllm_request, parse_vllm), "sglang": (sglang_request, parse_sglang),
          "echo": (echo_request, parse_echo)}

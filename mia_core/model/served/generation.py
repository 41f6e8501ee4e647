"""Sampled continuations from a vLLM server, for the black-box methods (SaMIA): one `/v1/completions` request per
sample, seeded with that sample's own seed, so a text's samples depend on nothing but (seed, text, j).

Each request sends the prompt as token ids (the ids the in-process sampler feeds), `max_tokens` = the text's budget,
temperature / top-k / top-p as `Sampling` says, `n=1` and `seed` = `sample_seeds(seed, text, n)[j]`; vLLM draws
from a generator of that request's own, so neither order, batching nor concurrency changes what it samples.
`return_token_ids` (vLLM ≥ 0.10) returns the continuation as ids, decoded here with the same tokenizer as an
in-process sample. vLLM's sampler is not torch's: the same seed gives the same continuation on the same server, not
the continuation the in-process sampler draws.
"""
from __future__ import annotations

from contextlib import closing
from functools import partial
from typing import Any, Sequence

from ..sampling import Sampling, sample_seeds
from .http import Client, ServedError
from .pool import answers


def sample_request(model: str, prompt: Sequence[int], budget: int, sampling: Sampling, seed: int) -> tuple[str, dict]:
    """(endpoint, body) asking vLLM for one seeded continuation of at most `budget` tokens after the prompt's ids."""
    return "/completions", {"model": model, "prompt": [int(i) for i in prompt], "max_tokens": int(budget), "n": 1,
                            "seed": int(seed), "temperature": float(sampling.temperature), "top_k": int(sampling.top_k),
                            "top_p": float(sampling.top_p), "return_token_ids": True}


def parse_continuation(answer: Any, budget: int) -> list[int]:
    """The sampled ids of a completion (`choices[0].token_ids`), or a ServedError saying what the server lacks."""
    try:
        ids = answer["choices"][0].get("token_ids")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ServedError("the server's answer has no choices[0]: not an OpenAI-style completion") from None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ServedError("the server returned no token ids for its sample (choices[0].token_ids): generation needs "
                          "vLLM ≥ 0.10, which returns them when asked with return_token_ids")
    if len(ids) > budget:
        raise ServedError(f"the server sampled {len(ids)} tokens where max_tokens was {budget}")
    return ids


def served_continuations(client: Client, model: str, concurrency: int, prompts: dict[str, list[int]],
                         budgets: dict[str, int], sampling: Sampling) -> dict[str, list[list[int]]]:
    """Text → its `sampling.n` continuations (ids after the prompt, at most `budgets[text]` each), one request per
    sample, `concurrency` at a time."""
    slots = [(text, j, seed) for text in prompts
             for j, seed in enumerate(sample_seeds(sampling.seed, text, sampling.n))]
    calls = [partial(_sample, client, model, prompts[text], budgets[text], sampling, seed) for text, _, seed in slots]
    out: dict[str, list[list[int]]] = {text: [[] for _ in range(sampling.n)] for text in prompts}
    with closing(answers(calls, concurrency, client.cancelled)) as finished:
        for k, ids in finished:
            text, j, _ = slots[k]
            out[text][j] = ids
    return out


def _sample(client: Client, model: str, prompt: list[int], budget: int, sampling: Sampling, seed: int) -> list[int]:
    """One request: one sample's continuation ids."""
    path, body = sample_request(model, prompt, budget, sampling, seed)
    return parse_continuation(client.post(path, body), budget)

"""A served model's extraction windows from vLLM-shaped answers (top-k prompt log-probs per position) against the
in-process reduction of the same logits in float64 (`extract.reduce`), without a server."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mia_core.extract.reduce import reduce_suffix_logits
from mia_core.model.served.extraction import suffix_logq
from mia_core.model.served.http import ServedError


def vllm_answer(logits: np.ndarray, ids: list[int], k: int) -> dict:
    """What vLLM returns with prompt_logprobs=k: per position the top k and the prompt's own token, with ranks."""
    rows: list = [None]
    for j in range(1, len(ids)):
        z = logits[j - 1]
        lp = z - (z.max() + math.log(np.exp(z - z.max()).sum()))
        keep = set(np.argsort(-z, kind="stable")[:k].tolist()) | {ids[j]}
        rows.append({str(v): {"logprob": float(lp[v]), "rank": int((z > z[v]).sum()) + 1, "decoded_token": "x"}
                     for v in keep})
    return {"choices": [{"prompt_logprobs": rows}]}


@pytest.mark.parametrize("k, temperature", [(1, 1.0), (4, 1.0), (4, 0.7), (12, 1.6)])
def test_suffix_logq_equals_the_in_process_reduction(k, temperature):
    rng = np.random.default_rng(k)
    vocab, fed = 50, 14
    logits = rng.normal(size=(fed, vocab)) * 2
    ids = rng.integers(0, vocab, fed).tolist()
    ids[9] = int(np.argmax(logits[8]))  # one suffix token the model ranks first
    first, suffix = 5, 6  # the suffix is ids[6:12]
    logq, rank = suffix_logq(vllm_answer(logits, ids, k), ids, first, suffix, k, temperature)
    want_q, want_rank = reduce_suffix_logits(torch.tensor(logits[first : first + suffix]),
                                             torch.tensor(ids[first + 1 : first + 1 + suffix]), k, temperature)
    assert rank.tolist() == want_rank.tolist() and 1 in rank.tolist()
    for got, want in zip(logq.tolist(), want_q.tolist()):
        assert (got == want == -math.inf) or got == pytest.approx(want, abs=1e-12)
    assert math.isinf(min(logq.tolist())) == (k < vocab and max(rank.tolist()) > k)


def test_an_answer_without_the_windows_log_probs_is_one_sentence():
    with pytest.raises(ServedError, match="no prompt log-probs for the window"):
        suffix_logq({"choices": [{"text": "x"}]}, [1, 2, 3], 0, 2, 3, 1.0)
    with pytest.raises(ServedError, match="lack the window's own token 3"):
        suffix_logq({"choices": [{"prompt_logprobs": [None, {"2": {"logprob": -1.0, "rank": 1}}, {}]}]},
                    [1, 2, 3], 0, 2, 3, 1.0)

"""Extraction windows over a served vLLM model: each distinct window is one request whose `prompt_logprobs` are the
top k of every position, reduced to what p_z needs — the same quantities the in-process pass takes from the logits
(`mia_core.extract.reduce`), here from the server's log-probs.

Top-k sampling at temperature T draws from softmax(z/T) over the k highest logits. The server's log-probs are
z − logsumexp(z) over the whole vocabulary, so that constant cancels: log q(true) = lp_true/T − logsumexp over the top
k of lp/T, when the true token's rank (1 + the tokens with a strictly higher log-prob, as vLLM counts it) is ≤ k;
else −inf. Tokens tied with the k-th beyond the k the server lists are not seen here (float logits rarely tie); the
in-process pass keeps them.
"""
from __future__ import annotations

import math
from contextlib import closing
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from .http import Client, ServedError
from .pool import answers
from .shapes import check_row_count, first_choice, vllm_request, vllm_row

LN10 = math.log(10.0)

Progress = Callable[[int, int], None]


def suffix_logq(answer: Any, ids: Sequence[int], first: int, suffix: int, top_k: int,
                temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """(log q of each suffix token (S,) float64, its rank (S,) int64) from one window's vLLM answer; the suffix is
    `ids[first + 1 : first + 1 + suffix]` (position j's log-probs are those of ids[j] given ids[:j])."""
    rows = first_choice(answer).get("prompt_logprobs")
    if not isinstance(rows, list) or len(rows) < first + 1 + suffix:
        raise ServedError("the server returned no prompt log-probs for the window (prompt_logprobs): extraction over "
                          "a served model needs vLLM with --max-logprobs at least the top-k")
    check_row_count(rows, ids, "window")
    logq, rank = np.empty(suffix, np.float64), np.empty(suffix, np.int64)
    for row, j in enumerate(range(first + 1, first + 1 + suffix)):
        names, logprobs, ranks = vllm_row(rows[j], j)
        at = names.index(int(ids[j])) if int(ids[j]) in names else None
        if at is None or ranks[at] < 1:
            raise ServedError(f"the server's prompt log-probs at position {j} lack the window's own token {ids[j]} or "
                              "its rank")
        given = np.asarray(ranks)
        top = logprobs[(given >= 1) & (given <= top_k)] / temperature
        rank[row] = ranks[at]
        if rank[row] > top_k:
            logq[row] = -math.inf
            continue
        peak = top.max()
        logq[row] = logprobs[at] / temperature - (peak + math.log(np.exp(top - peak).sum()))
    return logq, rank


def served_window_log10_pz(client: Client, model: str, concurrency: int, fed: np.ndarray, *, prefix: int,
                           suffix: int, top_k: int, temperature: float, n_lead: int,
                           progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log10 p_z (w,), greedy flag (w,)) of the windows `fed` (w, width): one request per distinct window, at most
    `concurrency` at a time, as `mia_core.extract.forward.window_log10_pz` computes them in process."""
    n = fed.shape[0]
    log10_pz, greedy = np.empty(n, np.float64), np.empty(n, bool)
    if n == 0:
        return log10_pz, greedy
    unique, inverse = np.unique(fed, axis=0, return_inverse=True)
    first = n_lead + prefix - 1  # the position whose log-probs are the first suffix token's
    calls = [partial(_window, client, model, row.tolist(), first, suffix, top_k, temperature) for row in unique]
    u_pz, u_greedy = np.empty(len(unique), np.float64), np.empty(len(unique), bool)
    with closing(answers(calls, concurrency, client.cancelled)) as finished:
        for done, (k, (logq, rank)) in enumerate(finished, 1):
            u_pz[k], u_greedy[k] = logq.sum() / LN10, bool((rank == 1).all())
            if progress is not None:
                progress(done, len(unique))
    log10_pz[:], greedy[:] = u_pz[inverse.reshape(-1)], u_greedy[inverse.reshape(-1)]
    return log10_pz, greedy


def _window(client: Client, model: str, ids: list[int], first: int, suffix: int, top_k: int,
            temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """One window's request: its suffix's log q and ranks."""
    path, body = vllm_request(model, ids, top_k)
    return suffix_logq(client.post(path, body), ids, first, suffix, top_k, temperature)

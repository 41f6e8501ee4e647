"""Independent, deliberately naive computations used as test oracles (float64, one text at a time)."""
from __future__ import annotations

import numpy as np
import torch


@torch.inference_mode()
def naive_stats(model, ids: list[int], context_start=None) -> dict[str, np.ndarray]:
    """Per-token statistics for tokens 1..len(ids)-1 from the full logits, in float64.

    `context_start(t)` gives the first index of the context used for token t (default 0).
    """
    rows = {k: [] for k in ("logprob", "mu", "sigma", "top1_id", "top1_logprob", "entropy", "rank")}
    full_logits = None if context_start else model(torch.tensor([ids])).logits[0].double()
    for t in range(1, len(ids)):
        if context_start:
            start = context_start(t)
            logits = model(torch.tensor([ids[start:t]])).logits[0, -1].double()
        else:
            logits = full_logits[t - 1]
        logp = torch.log_softmax(logits, -1).numpy()
        p = np.exp(logp)
        mu = float(np.sum(p * logp))
        rows["logprob"].append(logp[ids[t]])
        rows["mu"].append(mu)
        rows["sigma"].append(np.sqrt(np.sum(p * logp**2) - mu**2))
        rows["top1_id"].append(int(np.argmax(logp)))
        rows["top1_logprob"].append(float(np.max(logp)))
        rows["entropy"].append(float(-np.sum(p * logp)))
        rows["rank"].append(1 + sum(1 for v in logp if v > logp[ids[t]]))
    return {k: np.asarray(v) for k, v in rows.items()}


def naive_min_k(values, k: float) -> float:
    """Mean of the lowest max(1, int(n·k)) values, by sorting a Python list."""
    values = sorted(float(v) for v in values)
    n = max(1, int(len(values) * k))
    return sum(values[:n]) / n

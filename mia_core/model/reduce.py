"""Logits → per-token statistics: the reduction behind `TokenStats`, in float32 (float64 for float64 models)."""
from __future__ import annotations

import torch

from ..api.token_stats import LOGPROB_FLOOR


def stats_dtype(dtype: torch.dtype) -> torch.dtype:
    """Precision of logits and their statistics: float32 at least, float64 for a float64 model (exactness checks)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


@torch.inference_mode()
def reduce_logits(logits: torch.Tensor, targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """Reduce a (rows, vocab) block of logits to per-row statistics, in float32 (float64 for float64 logits).

    `targets` (rows,) holds the true next token of each row. The softmax runs over the full
    logits width; log_softmax is float32 even for bf16/fp16 models.
    """
    logits = logits.to(stats_dtype(logits.dtype))
    # z − logsumexp(z) rather than log_softmax: on the CPU the latter's fast exp left log p 1.7e-5 off a float64
    # recomputation on the demo model (this: 3.7e-6; docs/methods.md, "Precision")
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # (rows, vocab)
    p = logp.exp()  # (rows, vocab)
    # the row dot products as a product and a summing reduction: a matrix product (einsum, bmm) on the CPU summed
    # 49,152 terms with 7.7e-4 of error in μ on the demo model (this: 5e-6)
    mu = torch.linalg.vecdot(p, logp)  # (rows,)
    if not torch.isfinite(mu).all():  # −inf logits (masked vocabulary): 0·(−inf) is NaN, so floor them
        logp.clamp_(min=LOGPROB_FLOOR)
        mu = torch.linalg.vecdot(p, logp)
    top1_logprob, top1_id = logp.max(dim=-1)
    logprob = logp.gather(-1, targets[:, None]).squeeze(-1)
    # counted in int32 (half the time of the default int64 sum over a boolean block), returned as int64
    rank = (logp > logprob[:, None]).sum(-1, dtype=torch.int32).to(torch.int64) + 1  # (rows,)
    # centred second moment (avoids E[x²]−E[x]² cancellation), reusing logp's memory in place
    var = torch.linalg.vecdot(p, logp.sub_(mu[:, None]).square_())
    return {
        "logprob": logprob,
        "mu": mu,
        "sigma": var.clamp_min_(0.0).sqrt_(),
        "top1_id": top1_id,
        "top1_logprob": top1_logprob,
        "entropy": -mu,
        "rank": rank,
    }

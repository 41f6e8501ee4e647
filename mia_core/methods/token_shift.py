"""The per-token shift `d_t = ℓ_t − ℓ^ref_t` that EZ-MIA and WBC read (METHODS-FIELD.md part 2, conventions).

Both statistics must come from the same token ids (the same-token reference pass, need `ref_same_token_stats`), so
the two log-probs pair up token by token; a shift that is NaN or ±∞ is an error, never a score.
"""
from __future__ import annotations

import numpy as np

from ..api import TokenStats, TokenView, require_tokens


def token_shift(stats: TokenStats, ref_stats: TokenStats) -> np.ndarray:
    """`d_t = ℓ_t − ℓ^ref_t` in float64 over the n scored tokens, shape (n,); d_t > 0: the target raised the token."""
    require_tokens(stats)
    if not np.array_equal(stats.token_ids, ref_stats.token_ids):
        raise ValueError(f"the reference statistics score other tokens than the target's ({ref_stats.n_scored} "
                         f"tokens against {stats.n_scored}): they must come from the same-token reference pass")
    shift = stats.logprob.astype(np.float64) - ref_stats.logprob.astype(np.float64)
    if not np.all(np.isfinite(shift)):
        raise ValueError(f"the log-prob shift is not finite at {int(np.sum(~np.isfinite(shift)))} of {shift.size} "
                         "tokens")
    return shift


def shift_view(selected: str) -> TokenView:
    """The token view of a method that reads the shift: d per token, centred at 0; `selected` says which tokens count."""
    return TokenView("d = log p under the target − log p under the reference model, on the same token", selected,
                     low="lowered by the target: less member-like", high="raised by the target: more member-like",
                     centre=0.0)

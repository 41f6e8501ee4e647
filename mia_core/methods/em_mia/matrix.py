"""EM-MIA's ReCaLL matrix: every scored text as a one-text prefix of every judged text, on ReCaLL's prefix kernel.

`R[p, j] = LL(x_j | p) / min(LL(x_j), −1e-12)` with the conditional sequence `F(p) + F(x_j)` (METHODS-FIELD.md §15,
conditioning as `recall`): the shared pass's own tokens of `x_j` are scored, so both terms cover the same tokens.
Each prefix's key-value cache is computed once and reused for every judged text (`recall.prefix`). A prefix too long
for the context beside a text is left-truncated (its last tokens kept after `B`) and flagged.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...api import TokenStats
from ...model.language_model import LanguageModel
from ..recall import LL_CEILING
from ..recall.prefix import conditional_logprobs


def fed_sequences(lm: LanguageModel, stats: Sequence[TokenStats]) -> list[list[int]]:
    """Each text's fed ids `F(x)` (boundary token first under bos="auto"), checked against its statistics."""
    bos = stats[0].bos_policy
    out = []
    for st in stats:
        ids = lm.fed_ids(st.text, bos)
        if ids[1:1 + st.n_scored] != st.token_ids.tolist():
            raise ValueError("the statistics were not computed by this model's tokenizer under this BOS policy")
        out.append(ids)
    return out


def recall_matrix(lm: LanguageModel, stats: Sequence[TokenStats], judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, truncated): R (N, K) ReCaLL ratios of the judged texts after each of the N texts; truncated (N,) marks
    prefixes cut to fit the context beside some judged text."""
    fed = fed_sequences(lm, stats)
    sequences = [fed[j][:1 + stats[j].n_scored] for j in judged]  # B + the scored tokens
    ll = np.array([np.mean(stats[j].logprob, dtype=np.float64) for j in judged])
    room = [lm.max_length - len(seq) - 1 for seq in sequences]  # prefix text tokens that fit after B
    if min(room) < 1:
        worst = int(judged[int(np.argmin(room))])
        raise ValueError(f"text {worst} ({stats[worst].n_scored} tokens) leaves no room for a prefix in the model's "
                         f"{lm.max_length} tokens: EM-MIA needs texts of at most {lm.max_length - 3} tokens "
                         "(shorten them, or use long_text='truncate' with a shorter max_length)")
    ratios = np.empty((len(stats), judged.size))
    truncated = np.zeros(len(stats), dtype=bool)
    for p, ids in enumerate(fed):
        head, body = ids[:1], ids[1:]
        kept = [min(len(body), r) for r in room]
        truncated[p] = min(kept) < len(body)
        for n_kept in sorted(set(kept)):
            cols = [c for c, k in enumerate(kept) if k == n_kept]
            prefix = head + body[len(body) - n_kept:]
            for c, lp in zip(cols, conditional_logprobs(lm, prefix, [sequences[c] for c in cols])):
                ratios[p, c] = np.mean(lp, dtype=np.float64) / min(ll[c], LL_CEILING)
    return ratios, truncated

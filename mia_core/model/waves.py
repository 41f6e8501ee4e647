"""How the statistics pass cuts its texts into waves, tokenised one after the other while the device runs
(`pipeline.Wave`): the first batch starts once the first wave is tokenised, not once every text is."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .encoding import BATCH_TEXTS

#: Characters per token assumed when sizing waves (only the sizes depend on it: each wave's tokens are counted).
CHARS_PER_TOKEN = 4
#: The first wave holds about this share of a batch budget of tokens; each later wave twice the one before.
FIRST_WAVE_BUDGETS = 0.5


def plan_waves(chars: Sequence[int], budget_tokens: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) ranges of texts of these character lengths covering them all, in order: the first
    about `FIRST_WAVE_BUDGETS` batch budgets of tokens (at `CHARS_PER_TOKEN`), each next one twice as big, every one
    at least one text and at most `encoding.BATCH_TEXTS` texts (the tokenizer's memory bound)."""
    ends = np.cumsum(np.asarray(chars, dtype=np.int64))
    target = max(1.0, FIRST_WAVE_BUDGETS * budget_tokens * CHARS_PER_TOKEN)
    plan, start = [], 0
    while start < len(ends):
        before = int(ends[start - 1]) if start else 0
        end = int(np.searchsorted(ends, before + target, side="right"))
        end = min(max(end, start + 1), start + BATCH_TEXTS, len(ends))
        plan.append((start, end))
        start, target = end, 2 * target
    return plan

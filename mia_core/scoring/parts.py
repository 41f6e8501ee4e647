"""Scoring many texts a part at a time: one part's texts, tokens and statistics exist at once, not every text's.

`score_table` holds all its texts' tokens and statistics until it returns (10⁶ short rows took 3.6 GB before the first
was scored); `score_parts` calls it on one part after another (`PART_TEXTS` texts, `PART_CHARS` characters at most)
and keeps only each part's score rows: the id, n_tokens, long_text and one float per method. A text's score is the
same in any part when it depends on that text alone, which `can_part` checks: a method with a `prepare` hook sees all
texts at once (EM-MIA judges each text against the set), so such methods are scored in one part, as before.

What parts can move is a float's last bits. The texts that share a batch change with the parts, and on a CPU a batch
of another shape rounds a float32 pass differently (as another batch budget does: on the tests' tiny model 4e-8 of a
loss, 1.4e-5 of a Min-K%++ score); with one text per batch, parted scores are one part's bit for bit. An input that
fits one part is scored exactly as before.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from ..api import get_method
from ..model.language_model import LanguageModel
from . import score_table

#: Texts, and characters of text, one part holds at most (a longer text is a part of its own): ~50 MB of tokens and
#: statistics for short texts, a few hundred MB for long ones (tens of bytes per token, 4 characters a token).
PART_TEXTS = 1 << 14
PART_CHARS = 1 << 24


def can_part(methods: Sequence[str]) -> bool:
    """Whether every method scores a text from that text alone (no `prepare` hook over all texts), so texts scored a
    part at a time score as they would together."""
    return all(get_method(name).prepare is None for name in methods)


def score_parts(lm: LanguageModel, parts: Iterable[pd.DataFrame], methods: Sequence[str], *,
                texts_done: Callable[[int], None] | None = None, **options: Any) -> pd.DataFrame:
    """`score_table` of each part's texts in turn (a part: a frame of `id` and `text`), one row per text with its `id`
    first; a text's error names its number among all the parts' texts. `options` are `score_table`'s."""
    frames, first = [], 0
    for part in parts:
        scored = score_table(lm, part["text"].tolist(), methods, texts_done=texts_done, first_text=first, **options)
        scored.insert(0, "id", part["id"].to_numpy())
        frames.append(scored)
        first += len(part)
        del part, scored  # not held while the next part is read
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

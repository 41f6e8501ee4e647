"""The windows of one statistics pass's texts (`StatsModel.token_stats`), wave by wave: which segments each text is
fed as, and how its finished windows join into its statistics' arrays."""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from .forward import Segment, window_ids


class TextWindows:
    """The windows of one statistics pass's texts, wave by wave: each text's encoding, long-text flag and windows,
    and each window's place among its text's scored tokens, so finished windows join into their text's arrays."""

    def __init__(self, model: Any, bos: str, long_text: str, n_texts: int):
        self.model, self.bos, self.long_text = model, bos, long_text
        self.lead = len(model._with_boundary([], bos))  # 1 where the boundary token is fed first
        self.encodings: list = [None] * n_texts
        self.flags: list[str] = [""] * n_texts
        self.missing = [0] * n_texts  # windows of each text not back yet
        self.sizes = [0] * n_texts  # scored tokens of each text
        self.filled: list[dict | None] = [None] * n_texts  # statistics of texts with several windows, filled in place
        self.owners: list[int] = []  # per segment: its text
        self.places: list[int] = []  # per segment: its first scored token's place among its text's scored tokens

    def add(self, start: int, encodings: list, empty: list[int]) -> list[Segment]:
        """The segments of texts start, start + 1, … (their encodings); texts with nothing to score go to `empty`."""
        model, lead, segments = self.model, self.lead, []
        for owner, (ids, offsets) in enumerate(encodings, start):
            self.encodings[owner] = (ids, offsets)
            n_fed = lead + len(ids)
            if n_fed < 2:  # nothing to score (empty text, or one token with no boundary)
                windows, flag = [], "none"
            elif n_fed <= model.max_length:
                windows, flag = [(0, n_fed, 1)], "none"
            elif self.long_text == "truncate":
                windows, flag = [(0, model.max_length, 1)], "truncated"
            else:
                windows, flag = model.window_plan(n_fed, model.max_length, model.max_length // 2), "sliding"
            self.flags[owner] = flag
            counts = [b - a - s for a, b, s in windows]
            if isinstance(ids, np.ndarray):  # a long text: windows are views of its ids (no copy of them all)
                boundary = model._boundary if self.bos == "auto" else None
                segments += [Segment(owner, window_ids(ids, boundary, lead, a, b), s) for a, b, s in windows]
            else:
                full = model._with_boundary(ids, self.bos)
                segments += [Segment(owner, full[a:b], s) for a, b, s in windows]
            self.owners += [owner] * len(windows)
            self.places += itertools.accumulate(counts[:-1], initial=0) if windows else []
            self.missing[owner] = len(windows)
            self.sizes[owner] = sum(counts)
            if not windows:
                empty.append(owner)
        return segments

    def fill(self, k: int, stats: dict[str, np.ndarray]) -> tuple[int, dict | None]:
        """(text, its joined statistics once its last window is back, else None) for finished segment k."""
        owner = self.owners[k]
        if self.missing[owner] == 1 and self.filled[owner] is None:  # the text's only window: its arrays as they are
            joined = stats  # (a finished batch's arrays are its own: `FinishedBatch`)
        else:  # one of several windows: into the text's arrays, never all windows and their join at once
            joined = self.filled[owner] or {key: np.empty(self.sizes[owner], value.dtype) for key, value in stats.items()}
            self.filled[owner] = joined
            place = self.places[k]
            for key, value in stats.items():
                joined[key][place : place + len(value)] = value
        self.missing[owner] -= 1
        if self.missing[owner]:
            return owner, None
        self.filled[owner] = None
        return owner, joined

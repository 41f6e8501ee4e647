"""Where a text's extraction windows lie: its text tokens, their character offsets, and the start of every window.

A window is `prefix + suffix` consecutive text tokens. The model is fed the window alone — after the lead token
of the BOS policy (the document-boundary token, or the BOS a tokenizer such as Llama's puts first), never the
text before the window — and the suffix is what it must reproduce.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.encoding import encode_texts
from ..model.language_model import LanguageModel
from .settings import ExtractionSettings


@dataclass(frozen=True)
class WindowLayout:
    """A text's windows: `ids` (n,) its text tokens, `offsets` (n, 2) their characters, `starts` (w,) each window's
    first token, `lead` the token fed before each window (None: none)."""

    ids: np.ndarray
    offsets: np.ndarray
    starts: np.ndarray
    lead: int | None
    settings: ExtractionSettings

    @property
    def n_lead(self) -> int:
        """Tokens fed before a window's prefix (0 or 1)."""
        return 0 if self.lead is None else 1

    @property
    def fed_width(self) -> int:
        """Tokens fed per window."""
        return self.n_lead + self.settings.window

    @property
    def prefix_text_tokens(self) -> int:
        """Text tokens of each prefix (P: the lead token comes before it)."""
        return self.settings.prefix

    @property
    def n_windows(self) -> int:
        return len(self.starts)

    @property
    def n_text_tokens(self) -> int:
        return len(self.ids)

    def all_fed(self) -> np.ndarray:
        """(windows, fed_width) int64: what the model is fed for every window."""
        return self.fed(np.arange(self.n_windows))

    def fed(self, which: np.ndarray) -> np.ndarray:
        """(len(which), fed_width) int64: what the model is fed for the windows `which` (indices into `starts`)."""
        cols = self.starts[which][:, None] + np.arange(self.settings.window)[None, :]
        body = self.ids[cols]
        if self.lead is None:
            return body
        return np.concatenate((np.full((len(which), 1), self.lead, np.int64), body), axis=1)

    def spans(self) -> dict[str, np.ndarray]:
        """Each window's first token, first character, suffix's first character and last character + 1."""
        p, w = self.settings.prefix, self.settings.window
        starts = self.starts
        return {"token_start": starts, "char_start": self.offsets[starts, 0],
                "suffix_char_start": self.offsets[starts + p, 0], "char_end": self.offsets[starts + w - 1, 1]}


def window_starts(n_tokens: int, window: int, stride: int) -> np.ndarray:
    """Starts 0, stride, 2·stride, … of the windows that fit, plus one ending at the last token if the stride skips
    it (so every suffix token of the text is tested); none when the text is shorter than one window."""
    if n_tokens < window:
        return np.empty(0, np.int64)
    starts = np.arange(0, n_tokens - window + 1, stride, dtype=np.int64)
    if starts[-1] != n_tokens - window:
        starts = np.append(starts, n_tokens - window)
    return starts


def lead_token(lm: LanguageModel, ids: list[int] | np.ndarray, bos: str) -> tuple[int | None, int]:
    """(the token fed before each window, how many leading tokens of `ids` are that BOS rather than text).

    Under "auto": the model's document-boundary token, or, where the tokenizer itself puts its BOS first, that BOS
    (the statistics pass feeds the same first token). Under "none": nothing, and a tokenizer's BOS is dropped too.
    """
    bos_id = lm.tokenizer.bos_token_id
    starts_with_bos = len(ids) > 0 and bos_id is not None and int(ids[0]) == bos_id
    fed_first = lm.fed_ids("", bos) if bos == "auto" else []
    lead = int(fed_first[0]) if fed_first else None
    return lead, int(starts_with_bos)


def layout_text(lm: LanguageModel, text: str, settings: ExtractionSettings) -> WindowLayout:
    """The windows of one text under these settings."""
    return layout_encoded(lm, encode_texts(lm.tokenizer, [text], arrays=True)[0], settings)


def layout_encoded(lm: LanguageModel, encoding, settings: ExtractionSettings) -> WindowLayout:
    """The windows of a text from its (ids, offsets) encoding (`encode_texts(..., arrays=True)`)."""
    ids, offsets = encoding
    if settings.windows != "ours":
        raise ValueError(f"{settings.windows} windows are cut from the text's characters (extract.reference), not "
                         "from its tokens")
    if offsets is None:
        raise ValueError(f"extraction needs a fast tokenizer (character offsets); {lm.name}'s tokenizer has none")
    lead, skip = lead_token(lm, ids, settings.bos)
    ids = np.asarray(ids, dtype=np.int64)[skip:]
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[skip:]
    return WindowLayout(ids, offsets, window_starts(len(ids), settings.window, settings.stride), lead, settings)

"""Cooper et al.'s extraction windows (`windows="reference"`): cut as their code cuts them, so our numbers can be set
beside the paper's.

Read in `pasta41/book-extraction-science` at commit 7720bceb1cb97c0eb8e5fd8f84cd9e9b2db7e6ce (11 Aug 2025):

- `loaders/data_loader.py`, `book_text_to_sliding_window_token_chunks`: a cursor moves over the text `stride`
  *characters* at a time (`--stride`, 10) while it is inside the text; the slice of `8 · ex_len` characters from it
  (`slice_multiplier = 8`, `ex_len = P + S = 100`) is tokenised on its own and its first `ex_len` ids kept, or the
  slice dropped when it has fewer. `load_book_sliding` then drops a window whose ids hash like an earlier one's.
- `utils/tokenize.py`, `tokenize_custom`: the slice goes through the tokenizer with its special tokens (a Llama
  tokenizer's BOS comes first and counts among the `ex_len` ids); for Pythia a BOS is put first by hand.
- `pz.py`, `compute_logprob_batch` with `config.py`'s `suffix_start_index = 50`: the suffix is ids[50:], so with a
  BOS the prefix is BOS + P−1 text tokens. Top-k masks `logits < kth` to −inf (ties at the k-th kept, as ours);
  greedy is the same rule with k = 1, so m tokens tied at the top each get 1/m (`forward.WindowPz.log10_tied`).

Where this differs from their code: the lead token is the one our BOS policy feeds — `bos="auto"`: the tokenizer's
own BOS where it puts one first (their Llama path), else the model's document-boundary token (their Pythia path);
their code feeds no lead for other tokenizers without a BOS (Qwen 2.5), which is `bos="none"`. A special token a
tokenizer appends after a slice (an EOS) is dropped (`model.encoding`); their tokenizers append none. Logits are
reduced in float32; theirs in the model's dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.encoding import encode_texts
from ..model.language_model import LanguageModel
from .settings import ExtractionSettings
from .windows import lead_token

#: Characters sliced per window token (their `slice_multiplier`): a slice of 8·(P+S) characters is tokenised.
SLICE_CHARS_PER_TOKEN = 8
#: Slices tokenised per call (their strings and encodings are held at once).
SLICE_BATCH = 2048


@dataclass(frozen=True)
class ReferenceLayout:
    """A text's reference windows: `fed_ids` (w, P+S) int64 as fed (the lead token first where there is one),
    `span_arrays` each window's place (`result.SPAN_COLUMNS`; token_start counts the whole text's tokens),
    `n_text_tokens` of the whole text, `lead` the lead token (None: none)."""

    fed_ids: np.ndarray
    span_arrays: dict[str, np.ndarray]
    n_text_tokens: int
    lead: int | None
    settings: ExtractionSettings

    @property
    def n_lead(self) -> int:
        """Tokens fed before the prefix: none (the lead token is the prefix's first, their `suffix_start_index`)."""
        return 0

    @property
    def prefix_text_tokens(self) -> int:
        """Text tokens of each prefix: P − 1 after a lead token, else P."""
        return self.settings.prefix - (self.lead is not None)

    @property
    def fed_width(self) -> int:
        return self.settings.window

    @property
    def n_windows(self) -> int:
        return len(self.fed_ids)

    def all_fed(self) -> np.ndarray:
        """(windows, P+S) int64: what the model is fed for every window."""
        return self.fed_ids

    def spans(self) -> dict[str, np.ndarray]:
        """Each window's first token (of the whole text's), first character, suffix's first character, last + 1."""
        return self.span_arrays


def slice_starts(n_chars: int, stride: int) -> np.ndarray:
    """The first character of each of their slices: 0, stride, 2·stride, … below the text's length."""
    return np.arange(0, n_chars, stride, dtype=np.int64)


def reference_layout(lm: LanguageModel, text: str, whole, settings: ExtractionSettings) -> ReferenceLayout:
    """The reference windows of `text`; `whole` is its (ids, offsets) encoding (`encode_texts(..., arrays=True)`),
    for its token count and each window's first token among them."""
    ids, offsets = whole
    if offsets is None:
        raise ValueError(f"extraction needs a fast tokenizer (character offsets); {lm.name}'s tokenizer has none")
    lead, skip = lead_token(lm, ids, settings.bos)
    token_starts = np.asarray(offsets, np.int64).reshape(-1, 2)[skip:, 0]
    body, places = _slice_windows(lm, text, settings, lead is not None)
    if lead is not None:
        body = np.concatenate((np.full((len(body), 1), lead, np.int64), body), axis=1)
    keep = np.sort(np.unique(body, axis=0, return_index=True)[1]) if len(body) else np.empty(0, np.int64)
    first, suffix, end = places[keep].T
    spans = {"token_start": np.maximum(np.searchsorted(token_starts, first, side="right") - 1, 0),
             "char_start": first, "suffix_char_start": suffix, "char_end": end}
    return ReferenceLayout(body[keep], spans, len(token_starts), lead, settings)


def _slice_windows(lm: LanguageModel, text: str, settings: ExtractionSettings,
                   has_lead: bool) -> tuple[np.ndarray, np.ndarray]:
    """(text ids (w, P+S − lead) int64, (w, 3) int64 first character, suffix's first character, last character + 1)
    of every slice long enough, in text order (duplicates kept)."""
    keep = settings.window - has_lead  # text tokens per window
    first_suffix = settings.prefix - has_lead  # the suffix's first text token
    bos_id = lm.tokenizer.bos_token_id
    width = SLICE_CHARS_PER_TOKEN * settings.window
    cuts = slice_starts(len(text), settings.stride)
    rows, places = [], []
    for begin in range(0, len(cuts), SLICE_BATCH):
        chunk = cuts[begin : begin + SLICE_BATCH].tolist()
        for cut, (ids, offsets) in zip(chunk, encode_texts(lm.tokenizer, [text[c : c + width] for c in chunk],
                                                           arrays=True)):
            drop = int(len(ids) > 0 and bos_id is not None and int(ids[0]) == bos_id)  # its own BOS: the lead's place
            if len(ids) - drop < keep:
                continue
            rows.append(np.asarray(ids[drop : drop + keep], np.int64))
            spot = offsets[drop : drop + keep]  # (keep, 2) characters of the slice
            places.append((cut + spot[0, 0], cut + spot[first_suffix, 0], cut + spot[-1, 1]))
    if not rows:
        return np.empty((0, keep), np.int64), np.empty((0, 3), np.int64)
    return np.stack(rows), np.asarray(places, np.int64)

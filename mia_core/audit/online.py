"""Online (sliding-window) detection (Zhang et al., Min-K%++, Appendix C "An online detection setting").

The authors simulate "detect while generating": each input is a non-member WikiMIA text followed
by a member one, split into chunks of 32 and scored chunk by chunk, every chunk seeing the text
before it as context (log p(x_t | x_<t, y), y the prepended text); AUROC is computed over chunks.

Here: one `lm.token_stats([text], long_text="sliding")` gives every token its full left context
(texts longer than the model's context get at least half a context, see `split_windows`); then a
stats-only method is applied to each window of `window` consecutive scored tokens (default 32,
as the paper; tokens, where the paper does not say), every `stride` tokens (default = window:
non-overlapping, as the paper). The last window may be shorter. A window is labelled by the
passage that holds most of its tokens (`label_windows`), and window-level AUROC uses
`mia_core.metrics`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from .. import metrics
from ..inputs import datasets
from ..methods import get_method
from ..api import KParams
from ..model.language_model import LanguageModel
from ..api.token_stats import ARRAY_FIELDS, TokenStats

WINDOW_COLUMNS = ["window", "token_start", "token_end", "n_tokens", "char_start", "char_end", "text", "score"]


@dataclass(frozen=True)
class OnlineParams:
    """Window settings; the defaults are the paper's."""

    window: int = 32
    """Scored tokens per window (the paper: 32)."""
    stride: int | None = None
    """Tokens between window starts; None = window (non-overlapping, the paper)."""
    method: str = "min_k_pp"
    """A stats-only method (the paper's best online: Min-K%++)."""
    k: float = 0.2
    """k of the min-k% methods."""
    bos: str = "auto"
    """BOS policy of the statistics."""

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window must be at least 1 token (got {self.window})")
        if self.stride is not None and not 1 <= self.stride <= self.window:
            raise ValueError(f"stride must be between 1 and the window ({self.window}) (got {self.stride})")
        KParams(self.k)  # k validated where every method's k is
        spec = get_method(self.method)
        if not spec.stats_only:
            raise ValueError(f"method {self.method!r} needs {'+'.join(spec.needs)}; "
                             "window scores take a method that needs only the model's statistics")


def window_bounds(n_tokens: int, window: int, stride: int | None = None) -> list[tuple[int, int]]:
    """(start, end) token ranges every `stride` tokens, until a window reaches the last token.

    >>> window_bounds(70, 32)
    [(0, 32), (32, 64), (64, 70)]
    """
    stride = window if stride is None else stride
    if window < 1 or not 1 <= stride <= window:
        raise ValueError(f"need window ≥ 1 and 1 ≤ stride ≤ window (got window={window}, stride={stride})")
    bounds = []
    for start in range(0, n_tokens, stride):
        bounds.append((start, min(start + window, n_tokens)))
        if start + window >= n_tokens:
            break
    return bounds


def window_view(stats: TokenStats, start: int, end: int) -> TokenStats:
    """The statistics of scored tokens [start, end) as a `TokenStats` of the window's own text.

    Statistics keep the full left context they were computed with; `text` is the window's span of
    the original text (so text-based methods such as zlib see only the window) and offsets are
    shifted to it. `extra` holds "window": (start, end) and "char_span": (char_start, char_end).
    """
    if not 0 <= start < end <= stats.n_scored:
        raise ValueError(f"window [{start}, {end}) is outside the {stats.n_scored} scored tokens")
    a, b = _char_span(stats.offsets[start:end])
    offsets = stats.offsets[start:end].copy()
    real = offsets[:, 1] > offsets[:, 0]
    offsets[real] -= a  # specials keep (0, 0)
    sliced = {name: getattr(stats, name)[start:end] for name in ARRAY_FIELDS}
    return dataclasses.replace(stats, text=stats.text[a:b], tokens=list(stats.tokens[start:end]),
                               **{**sliced, "offsets": offsets}, n_text_tokens=end - start,
                               extra={"window": (start, end), "char_span": (a, b)})


def window_scores(stats: TokenStats, params: OnlineParams = OnlineParams(), **method_params) -> pd.DataFrame:
    """Score every window of one text's statistics: one row per window (columns `WINDOW_COLUMNS`).

    `method_params` are further parameters of the method (k comes from `params`).
    """
    spec = get_method(params.method)
    values = {**method_params, **({"k": params.k} if "k" in spec.param_names else {})}
    method = spec.make_params(**values)
    rows = []
    for i, (start, end) in enumerate(window_bounds(stats.n_scored, params.window, params.stride)):
        view = window_view(stats, start, end)
        a, b = view.extra["char_span"]
        rows.append({"window": i, "token_start": start, "token_end": end, "n_tokens": end - start,
                     "char_start": a, "char_end": b, "text": view.text, "score": spec.fn(view, method).value})
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def detect_online(lm: LanguageModel, text: str, params: OnlineParams = OnlineParams(), *,
                  progress: Callable[[int, int], None] | None = None) -> tuple[TokenStats, pd.DataFrame]:
    """One forward over the whole text (full left context), then `window_scores`."""
    stats = lm.token_stats([text], bos=params.bos, progress=progress, long_text="sliding")[0]
    if stats.n_scored == 0:
        raise ValueError("no token to score: the text is empty")
    return stats, window_scores(stats, params)


def join_passages(passages: Sequence[str], labels: Sequence[int], *,
                  sep: str = "\n\n") -> tuple[str, list[tuple[int, int, int]]]:
    """One text from labelled passages, with the (char_start, char_end, label) span of each passage."""
    if len(passages) != len(labels):
        raise ValueError(f"{len(labels)} labels for {len(passages)} passages")
    text, spans = "", []
    for i, (passage, label) in enumerate(zip(passages, labels)):
        text += sep if i else ""
        spans.append((len(text), len(text) + len(passage), int(label)))
        text += passage
    return text, spans


def demo_passages(n_pairs: int = 3, *, bucket: int = 128, seed: int = 0) -> tuple[list[str], list[int]]:
    """`n_pairs` (non-member, member) pairs of demo-wiki paragraphs, in the paper's order (non-member first).

    Membership is known only for the `demo-known` model (trained on the members).
    """
    if n_pairs < 1:
        raise ValueError(f"n_pairs must be at least 1 (got {n_pairs})")
    data = datasets.load("demo-wiki")
    data = data[data["bucket"] == bucket]
    if data.empty:
        raise ValueError(f"demo-wiki has no {bucket}-word paragraphs")
    picks = {label: data[data["label"] == label].sample(n_pairs, random_state=seed)["text"].tolist() for label in (0, 1)}
    passages = [text for pair in zip(picks[0], picks[1]) for text in pair]
    return passages, [0, 1] * n_pairs


def label_windows(stats: TokenStats, windows: pd.DataFrame, spans: Sequence[tuple[int, int, int]]) -> np.ndarray:
    """Label of each window = label of the passage holding most of its tokens; -1 if it holds none.

    A token belongs to the passage its characters overlap most (a byte-level token " The" whose
    space lies in the separator still belongs to the passage of "The"); a tie between passages
    goes to the earlier passage.
    """
    starts = np.array([s[0] for s in spans], dtype=np.int64)
    ends = np.array([s[1] for s in spans], dtype=np.int64)
    labels = np.array([s[2] for s in spans], dtype=np.int64)
    a, b = stats.offsets[:, :1], stats.offsets[:, 1:]  # (n_scored, 1)
    overlap = np.clip(np.minimum(b, ends[None]) - np.maximum(a, starts[None]), 0, None)  # (n_scored, n_passages)
    owner = np.where(overlap.max(axis=1) > 0, overlap.argmax(axis=1), -1)  # (n_scored,)
    out = np.full(len(windows), -1, dtype=np.int64)
    for i, (start, end) in enumerate(zip(windows["token_start"], windows["token_end"])):
        held = owner[start:end]
        held = held[held >= 0]
        if held.size:
            out[i] = labels[np.bincount(held, minlength=len(spans)).argmax()]
    return out


def window_auroc(windows: pd.DataFrame, labels) -> float:
    """AUROC of window scores against window labels (1 = member); unlabelled (-1) windows are left out."""
    labels = np.asarray(labels)
    keep = labels >= 0
    return metrics.auroc(labels[keep], windows["score"].to_numpy()[keep])


def _char_span(offsets: np.ndarray) -> tuple[int, int]:
    """The character span covered by tokens with real offsets ((0, 0) for a window of specials only)."""
    real = offsets[:, 1] > offsets[:, 0]
    if not real.any():
        return 0, 0
    return int(offsets[real, 0].min()), int(offsets[real, 1].max())

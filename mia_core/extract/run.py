"""`extraction` and `extract_texts`: (n,p)-discoverable extraction of texts under a model, cached per text.

A text's result is kept in the statistics cache beside its `TokenStats`, keyed like them: the model's fingerprint
and dtype, the extraction settings, and the text's hash.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..model.encoding import encode_texts
from ..model.language_model import LanguageModel
from .forward import ComputesWindows, window_log10_pz
from .result import SPAN_COLUMNS, ExtractionResult, window_table
from .settings import MAX_WINDOWS, ExtractionSettings
from .windows import layout_encoded

#: Bumped when what a cached entry means changes (older entries are then misses).
CACHE_VERSION = 1
#: The arrays a cached entry holds: the windows' places, then the pass's results.
CACHED_ARRAYS = (*SPAN_COLUMNS, "log10_pz", "greedy")

Progress = Callable[[int, int], None]


def extraction(lm: LanguageModel, text: str, *, prefix: int = 50, suffix: int = 50, stride: int = 10, top_k: int = 40,
               temperature: float = 1.0, bos: str = "auto", cache: bool = True) -> ExtractionResult:
    """The extraction windows of one text: log10 p_z, greedy flag and n needed per window (`ExtractionResult`)."""
    settings = ExtractionSettings(prefix, suffix, stride, top_k, temperature, bos)
    return extract_texts(lm, [text], settings, cache=cache)[0]


def extract_texts(lm: LanguageModel, texts: Sequence[str], settings: ExtractionSettings = ExtractionSettings(), *,
                  progress: Progress | None = None, cache: bool = True,
                  batch_tokens: int | None = None) -> list[ExtractionResult]:
    """`ExtractionResult` of every text, in input order; the windows of every text not cached go through one pass.

    progress : called as progress(windows done, windows to compute) (distinct windows: a repeated one is computed once).
    batch_tokens : tokens fed per batch (default `LanguageModel.auto_batch_tokens`).
    """
    texts = [str(t) for t in texts]
    model_key = f"extraction-v{CACHE_VERSION}|{lm.fingerprint}|{lm.dtype}|{settings.key()}"
    keys = [lm.stats_cache.key(model_key, t) for t in texts]
    out = [_cached(lm, key, text, settings) if cache else None for key, text in zip(keys, texts)]
    todo = [i for i, result in enumerate(out) if result is None]
    if not todo:
        return out  # type: ignore[return-value]
    layouts = [layout_encoded(lm, e, settings) for e in encode_texts(lm.tokenizer, [texts[i] for i in todo], arrays=True)]
    if layouts[0].fed_width > lm.max_length:
        raise ValueError(f"an extraction window is {layouts[0].fed_width} tokens fed, more than {lm.name}'s context of "
                         f"{lm.max_length}: shorten the prefix or suffix")
    counts = [len(layout.starts) for layout in layouts]
    if sum(counts) > MAX_WINDOWS:
        raise ValueError(f"{sum(counts):,} windows to test, more than {MAX_WINDOWS:,} at once: raise the stride "
                         f"(now {settings.stride} tokens) or pass fewer texts at a time")
    fed = np.concatenate([layout.fed(np.arange(c)) for layout, c in zip(layouts, counts)])
    log10_pz, greedy = fed_log10_pz(lm, fed, settings, layouts[0].n_lead, batch_tokens=batch_tokens,
                                    progress=progress)
    bounds = np.cumsum(counts)[:-1]
    for i, layout, pz, flags in zip(todo, layouts, np.split(log10_pz, bounds), np.split(greedy, bounds)):
        spans = layout.spans()
        out[i] = ExtractionResult(texts[i], settings, window_table(spans, settings, pz, flags), len(layout.ids))
        if cache:
            arrays = {**spans, "log10_pz": pz, "greedy": flags.astype(np.int64)}
            lm.stats_cache.put_arrays(keys[i], arrays, {"kind": "extraction", "n_text_tokens": len(layout.ids)})
    return out  # type: ignore[return-value]


def fed_log10_pz(lm: LanguageModel, fed: np.ndarray, settings: ExtractionSettings, n_lead: int, *,
                 batch_tokens: int | None = None, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log10 p_z, greedy) of windows as fed (windows, width): the pass here, or by the server of a served model."""
    if isinstance(lm, ComputesWindows):  # a served model: its server computes the windows
        return lm.extraction_windows(fed, prefix=settings.prefix, suffix=settings.suffix, top_k=settings.top_k,
                                     temperature=settings.temperature, n_lead=n_lead, progress=progress)
    return window_log10_pz(lm.model, fed, settings, n_lead, batch_tokens=batch_tokens or lm.auto_batch_tokens(),
                           progress=progress)


def _cached(lm: LanguageModel, key: str, text: str, settings: ExtractionSettings) -> ExtractionResult | None:
    """A text's cached result, or None (missing, or an entry of another shape)."""
    found = lm.stats_cache.get_arrays(key)
    if found is None:
        return None
    arrays, meta = found
    shapes = {arrays[name].shape for name in CACHED_ARRAYS if name in arrays}
    if meta.get("kind") != "extraction" or set(arrays) != set(CACHED_ARRAYS) or len(shapes) != 1 or \
            len(next(iter(shapes))) != 1 or not isinstance(meta.get("n_text_tokens"), int):
        return None
    table = window_table(arrays, settings, arrays["log10_pz"], arrays["greedy"])
    return ExtractionResult(text, settings, table, meta["n_text_tokens"])

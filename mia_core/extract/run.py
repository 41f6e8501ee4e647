"""`extraction` and `extract_texts`: (n,p)-discoverable extraction of texts under a model, cached per text.

A text's result is kept in the statistics cache beside its `TokenStats`, keyed like them: the model's fingerprint
and dtype, the extraction settings, and the text's hash.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..model.encoding import encode_texts
from ..model.language_model import LanguageModel
from .forward import ComputesWindows, WindowPz, window_pz
from .reference import ReferenceLayout, reference_layout, slice_starts
from .result import SPAN_COLUMNS, ExtractionResult, greedy_columns, window_table
from .settings import MAX_WINDOWS, ExtractionSettings
from .windows import WindowLayout, layout_encoded

#: Bumped when what a cached entry means changes (older entries are then misses).
CACHE_VERSION = 1
#: The arrays a cached entry holds: the windows' places, then the pass's results.
CACHED_ARRAYS = (*SPAN_COLUMNS, "log10_pz", "greedy")
#: What a reference-windows entry holds besides: the greedy probability (ties at the top as 1/m), text tokens per prefix.
REFERENCE_ARRAYS = ("log10_pz_greedy", "prefix_tokens")

Progress = Callable[[int, int], None]


def extraction(lm: LanguageModel, text: str, *, prefix: int = 50, suffix: int = 50, stride: int = 10, top_k: int = 40,
               temperature: float = 1.0, bos: str = "auto", windows: str = "ours", cache: bool = True) -> ExtractionResult:
    """The extraction windows of one text: log10 p_z, greedy flag and n needed per window (`ExtractionResult`)."""
    settings = ExtractionSettings(prefix, suffix, stride, top_k, temperature, bos, windows)
    return extract_texts(lm, [text], settings, cache=cache)[0]


def extract_texts(lm: LanguageModel, texts: Sequence[str], settings: ExtractionSettings = ExtractionSettings(), *,
                  progress: Progress | None = None, cache: bool = True,
                  batch_tokens: int | None = None) -> list[ExtractionResult]:
    """`ExtractionResult` of every text, in input order; the windows of every text not cached go through one pass.

    progress : called as progress(windows done, windows to compute) (distinct windows: a repeated one is computed once).
    batch_tokens : tokens fed per batch (default `LanguageModel.auto_batch_tokens`).
    """
    texts = [str(t) for t in texts]
    if settings.windows == "reference" and isinstance(lm, ComputesWindows):
        raise ValueError(f"reference windows count the tokens tied at the top of each suffix position, which "
                         f"{lm.name}'s server does not report: use our windows with a served model")
    model_key = f"extraction-v{CACHE_VERSION}|{lm.fingerprint}|{lm.dtype}|{settings.key()}"
    keys = [lm.stats_cache.key(model_key, t) for t in texts]
    out = [_cached(lm, key, text, settings) if cache else None for key, text in zip(keys, texts)]
    todo = [i for i, result in enumerate(out) if result is None]
    if not todo:
        return out  # type: ignore[return-value]
    layouts = _layouts(lm, [texts[i] for i in todo], settings)
    if layouts[0].fed_width > lm.max_length:
        raise ValueError(f"an extraction window is {layouts[0].fed_width} tokens fed, more than {lm.name}'s context of "
                         f"{lm.max_length}: shorten the prefix or suffix")
    counts = [layout.n_windows for layout in layouts]
    _check_count(sum(counts), settings)
    fed = np.concatenate([layout.all_fed() for layout in layouts])
    found = fed_window_pz(lm, fed, settings, layouts[0].n_lead, batch_tokens=batch_tokens, progress=progress)
    greedy, log10_greedy = greedy_columns(settings.windows, found.top, found.log10_tied)
    bounds = np.cumsum(counts)[:-1]
    for i, layout, pz, flags, tied in zip(todo, layouts, np.split(found.log10_pz, bounds), np.split(greedy, bounds),
                                          np.split(log10_greedy, bounds)):
        spans, prefix_tokens = layout.spans(), layout.prefix_text_tokens
        table = window_table(spans, settings, pz, flags, log10_pz_greedy=tied, prefix_tokens=prefix_tokens)
        out[i] = ExtractionResult(texts[i], settings, table, layout.n_text_tokens)
        if cache:
            arrays = {**spans, "log10_pz": pz, "greedy": flags.astype(np.int64)}
            if settings.windows == "reference":
                arrays.update(log10_pz_greedy=tied, prefix_tokens=np.full(len(pz), prefix_tokens, np.int64))
            lm.stats_cache.put_arrays(keys[i], arrays, {"kind": "extraction", "n_text_tokens": layout.n_text_tokens})
    return out  # type: ignore[return-value]


def _layouts(lm: LanguageModel, texts: list[str], settings: ExtractionSettings) -> list[WindowLayout | ReferenceLayout]:
    """Every text's windows under the settings' scheme (the reference windows' count checked before they are cut)."""
    encodings = encode_texts(lm.tokenizer, texts, arrays=True)
    if settings.windows == "ours":
        return [layout_encoded(lm, e, settings) for e in encodings]
    _check_count(sum(len(slice_starts(len(t), settings.stride)) for t in texts), settings)
    return [reference_layout(lm, t, e, settings) for t, e in zip(texts, encodings)]


def _check_count(windows: int, settings: ExtractionSettings) -> None:
    """Refuse more than `MAX_WINDOWS` windows, saying what to change."""
    if windows > MAX_WINDOWS:
        raise ValueError(f"{windows:,} windows to test, more than {MAX_WINDOWS:,} at once: raise the stride "
                         f"(now {settings.stride} {settings.stride_unit}) or pass fewer texts at a time")


def fed_window_pz(lm: LanguageModel, fed: np.ndarray, settings: ExtractionSettings, n_lead: int, *,
                  batch_tokens: int | None = None, progress: Progress | None = None) -> WindowPz:
    """`WindowPz` of windows as fed (windows, width): the pass here (with the ties at the top under reference
    windows), or by the server of a served model (which reports no ties)."""
    if isinstance(lm, ComputesWindows):  # a served model: its server computes the windows
        log10_pz, top = lm.extraction_windows(fed, prefix=settings.prefix, suffix=settings.suffix,
                                              top_k=settings.top_k, temperature=settings.temperature, n_lead=n_lead,
                                              progress=progress)
        return WindowPz(log10_pz, top)
    return window_pz(lm.model, fed, settings, n_lead, batch_tokens=batch_tokens or lm.auto_batch_tokens(),
                     progress=progress, tied=settings.windows == "reference")


def fed_log10_pz(lm: LanguageModel, fed: np.ndarray, settings: ExtractionSettings, n_lead: int, *,
                 batch_tokens: int | None = None, progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(log10 p_z, greedy) of windows as fed (windows, width) under our windows' greedy rule (`fed_window_pz`)."""
    found = fed_window_pz(lm, fed, settings, n_lead, batch_tokens=batch_tokens, progress=progress)
    return found.log10_pz, found.top


def _cached(lm: LanguageModel, key: str, text: str, settings: ExtractionSettings) -> ExtractionResult | None:
    """A text's cached result, or None (missing, or an entry of another shape)."""
    found = lm.stats_cache.get_arrays(key)
    if found is None:
        return None
    arrays, meta = found
    names = CACHED_ARRAYS + (REFERENCE_ARRAYS if settings.windows == "reference" else ())
    shapes = {arrays[name].shape for name in names if name in arrays}
    if meta.get("kind") != "extraction" or set(arrays) != set(names) or len(shapes) != 1 or \
            len(next(iter(shapes))) != 1 or not isinstance(meta.get("n_text_tokens"), int):
        return None
    extra = {"log10_pz_greedy": arrays["log10_pz_greedy"], "prefix_tokens": int(arrays["prefix_tokens"][0])} \
        if settings.windows == "reference" and len(arrays["prefix_tokens"]) else {}
    table = window_table(arrays, settings, arrays["log10_pz"], arrays["greedy"], **extra)
    return ExtractionResult(text, settings, table, meta["n_text_tokens"])

"""Explore's exports: a per-token CSV of the statistics and every shown method's token scores, and a standalone
heatmap HTML (one file, inline CSS, stamped with model, text and settings) to keep or send with a report.

Both are plain functions of `TokenStats` and `Score`s, so a script can write the same files as the page.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from .csv_safe import to_csv_safe
from .heatmap import TIP_CSS, Scale, legend_html, token_spans
from .api import Score, TokenStats
from .stamp import ResultStamp
from .version import code_version

#: Columns of the per-token CSV before the methods' own (`<method>_score`, `<method>_selected`).
TOKEN_COLUMNS = ("position", "token", "char_start", "char_end", "logprob", "mu", "sigma", "rank", "top1_token",
                 "top1_logprob")


@dataclass(frozen=True)
class Panel:
    """One method's heatmap as shown: its score, colour scale and the words of its legend."""

    method: str
    label: str
    score: Score
    scale: Scale
    scale_note: str
    member_high: bool = True
    colour_means: str = ""
    low_means: str = ""
    high_means: str = ""
    outlined: str = "tokens in the sequence score"


def token_table(stats: TokenStats, scores: dict[str, Score], decode: Callable[[int], str] | None = None) -> pd.DataFrame:
    """One row per scored token: its text and offsets, the statistics, and each method's token score and selection."""
    top1 = [decode(int(i)) if decode else str(int(i)) for i in stats.top1_id]
    table = pd.DataFrame({
        "position": np.arange(stats.n_scored), "token": list(stats.tokens),
        "char_start": stats.offsets[:, 0].astype(int), "char_end": stats.offsets[:, 1].astype(int),
        "logprob": stats.logprob.astype(np.float64), "mu": stats.mu.astype(np.float64),
        "sigma": stats.sigma.astype(np.float64), "rank": stats.rank.astype(int), "top1_token": top1,
        "top1_logprob": stats.top1_logprob.astype(np.float64)})
    for method, score in scores.items():
        values = np.asarray(score.token_scores, dtype=np.float64)
        if values.shape != (stats.n_scored,):
            raise ValueError(f"{method}: {values.shape[0]} token scores for {stats.n_scored} tokens")
        table[f"{method}_score"] = values
        table[f"{method}_selected"] = np.asarray(score.selected, dtype=bool)
    return table


def token_csv(stats: TokenStats, scores: dict[str, Score], decode: Callable[[int], str] | None = None) -> str:
    """`token_table` as CSV text, cells that a spreadsheet would run as formulas neutralised (`csv_safe`)."""
    return to_csv_safe(token_table(stats, scores, decode))


def heatmap_document(stats: TokenStats, panels: list[Panel], stamp: ResultStamp,
                     decode: Callable[[int], str] | None = None) -> str:
    """A standalone HTML page: the stamp, then per method its score and the whole text's heatmap with its legend."""
    e = html.escape
    sections = []
    for i, panel in enumerate(panels):
        body = token_spans(stats, panel.score.token_scores, panel.score.selected, panel.scale, 0, stats.n_scored,
                           member_high=panel.member_high, decode=decode)
        legend = legend_html(*panel.scale, member_high=panel.member_high, colour_means=panel.colour_means,
                             low_means=panel.low_means, high_means=panel.high_means, outlined=panel.outlined,
                             scale_note=panel.scale_note)
        sections.append(f'<section><h2>{e(panel.label)}: {panel.score.value:.4f}</h2>'
                        f'<div id="heatmap-{i}" class="mia-heatmap">{body}</div>{legend}</section>')
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Token heatmap: {e(stamp.text_preview)}'
        f'</title><style>body{{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}}'
        '.mia-heatmap{white-space:pre-wrap;font-family:ui-monospace,monospace;line-height:1.7;padding:0.5em;'
        'border:1px solid #ddd;border-radius:4px}.stamp{color:#444}</style>'
        f'{TIP_CSS}</head><body><h1>Token heatmap</h1><p class="stamp">Computed for {e(stamp.describe())}; '
        f'{stats.n_scored:,} tokens scored; MIA Lens {e(code_version())}. Higher scores = more member-like; on its '
        'own a score is not evidence: compare it with texts of known membership.</p>' + "".join(sections)
        + "</body></html>")


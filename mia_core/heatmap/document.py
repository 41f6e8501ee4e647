"""The standalone heatmap page: one HTML file, inline CSS, stamped with model, text and settings, holding every
method's whole-text heatmap with its legend — Explore's "Heatmaps (standalone HTML)" download and `mia heatmap`."""
from __future__ import annotations

import html
from typing import Callable

from ..api import TokenStats
from ..stamp import ResultStamp
from ..version import code_version
from .panel import Panel, panel_legend
from .render import TIP_CSS, token_spans


def heatmap_document(stats: TokenStats, panels: list[Panel], stamp: ResultStamp,
                     decode: Callable[[int], str] | None = None) -> str:
    """A standalone HTML page: the stamp, then per method its score and the whole text's heatmap with its legend."""
    e = html.escape
    sections = []
    for i, panel in enumerate(panels):
        body = token_spans(stats, panel.score.token_scores, panel.score.selected, panel.scale, 0, stats.n_scored,
                           member_high=panel.member_high, decode=decode)
        sections.append(f'<section><h2>{e(panel.label)}: {panel.score.value:.4f}</h2>'
                        f'<div id="heatmap-{i}" class="mia-heatmap">{body}</div>{panel_legend(panel)}</section>')
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Token heatmap: {e(stamp.text_preview)}'
        f'</title><style>body{{font-family:system-ui,sans-serif;max-width:60em;margin:2em auto;padding:0 1em}}'
        '.mia-heatmap{white-space:pre-wrap;font-family:ui-monospace,monospace;line-height:1.7;padding:0.5em;'
        'border:1px solid #ddd;border-radius:4px}.stamp{color:#444}</style>'
        f'{TIP_CSS}</head><body><h1>Token heatmap</h1><p class="stamp">Computed for {e(stamp.describe())}; '
        f'{stats.n_scored:,} tokens scored; MIA Lens {e(code_version())}. Higher scores = more member-like; on its '
        'own a score is not evidence: compare it with texts of known membership.</p>' + "".join(sections)
        + "</body></html>")

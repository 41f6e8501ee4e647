"""Per-token heatmaps as HTML: the text coloured by a method's token scores, the colour scales and the legend.

Used by the method panels (`panel`), the standalone page (`document`), the dashboard and HTML reports. Colours carry
one meaning everywhere (`palette`): red = member-like, blue = less member-like; for most methods that is the high end
of the token scores, for a few (ReCaLL) the low end (`member_high=False`). Every piece of user text is HTML-escaped;
whitespace and newlines are preserved (`white-space: pre-wrap`). Tokens that entered the sequence score are
outlined. Each token's details show at once in a styled box on hover, and stay while the token is clicked
(focused) so they can be selected and copied: pure HTML and CSS, since `st.html` runs no JavaScript. At most
`MAX_HEATMAP_TOKENS` tokens are drawn at once (`limits.heatmap_pages`), so no heatmap grows to hundreds of MB.
"""
from __future__ import annotations

import html
import math
from typing import Callable

import numpy as np

from ..limits import MAX_HEATMAP_TOKENS
from ..api import TokenStats
from ..palette import HIGH_RGB, LOW_RGB, MID_RGB

#: Diverging scale: low scores blue, the centre near white, high scores red (member-like for most methods).
LOW, MID, HIGH = LOW_RGB, MID_RGB, HIGH_RGB
#: Hover boxes: a focused token (clicked) keeps its box; the box is a read-only field, so its text can be copied.
TIP_CSS = (
    "<style>.mia-heatmap{position:relative}.mia-tok{cursor:pointer}"
    ".mia-tip{display:none;position:absolute;left:0.5em;z-index:30;margin-top:1.55em;field-sizing:content;"
    "max-width:calc(100% - 1em);resize:none;overflow:hidden;"
    "font:0.8rem/1.4 ui-monospace,monospace;color:#fff;background:#222;border:0;border-radius:4px;"
    "padding:0.3em 0.5em;box-shadow:0 2px 8px rgba(0,0,0,0.35);white-space:pre-wrap}"
    ".mia-tok:hover>.mia-tip,.mia-tok:focus-within>.mia-tip{display:block}"
    ".mia-tok:focus{box-shadow:0 0 0 2px #555}</style>")
Scale = tuple[float, float, float]


def colour_scale(values: np.ndarray, *, centre: float | None = None) -> Scale:
    """(low, centre, high) from the 5th/95th percentiles; `centre` defaults to their midpoint."""
    if values.size == 0:
        return -1.0, 0.0, 1.0
    low, high = (float(v) for v in np.percentile(values, [5, 95]))
    return _around(low, high, centre)


def fixed_scale(token_range: tuple[float, float], *, centre: float | None = None) -> Scale:
    """(low, centre, high) of a declared range (`MethodSpec.token_range`); `centre` defaults to its midpoint."""
    return _around(float(token_range[0]), float(token_range[1]), centre)


def reference_scale(token_scores: list[np.ndarray], *, centre: float | None = None) -> Scale:
    """(low, centre, high) from the 5th/95th percentiles of the pooled token scores of reference texts."""
    pooled = np.concatenate([np.asarray(v, dtype=np.float64) for v in token_scores]) if token_scores else np.zeros(0)
    return colour_scale(pooled[np.isfinite(pooled)], centre=centre)


def _around(low: float, high: float, centre: float | None) -> Scale:
    """The scale with its centre (the midpoint unless given), widened so low < centre < high."""
    if centre is None:
        centre = (low + high) / 2
    return min(low, centre - 1e-9), centre, max(high, centre + 1e-9)


def colour(value: float, low: float, centre: float, high: float, *, member_high: bool = True) -> str:
    """CSS rgb() of a value on the diverging scale (clipped to [low, high]): red at the member-like end."""
    top, bottom = (HIGH, LOW) if member_high else (LOW, HIGH)
    if value <= centre:
        t, end = (centre - max(value, low)) / (centre - low), bottom
    else:
        t, end = (min(value, high) - centre) / (high - centre), top
    r, g, b = (round(s + (e - s) * t) for s, e in zip(MID, end))
    return f"rgb({r},{g},{b})"


def text_colour(background: str) -> str:
    """Black or white text, whichever reads better on the background (relative luminance)."""
    r, g, b = (int(v) for v in background[4:-1].split(","))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


#: What a token's details say of μ and σ when the model did not give them (a server asked for top log-probs only).
MOMENTS_MISSING = "μ, σ: not returned by this server"


def token_tooltip(stats: TokenStats, i: int, score: float, decode: Callable[[int], str] | None) -> str:
    """Details of token i on one line: the token, its score, log p, μ, σ, rank and the top-1 alternative."""
    top1 = decode(int(stats.top1_id[i])) if decode else str(int(stats.top1_id[i]))
    mu, sigma = float(stats.mu[i]), float(stats.sigma[i])
    moments = (f"μ {mu:.3f} · σ {sigma:.3f}" if math.isfinite(mu) and math.isfinite(sigma)
               else MOMENTS_MISSING)  # a served model's top-k log-probs carry no full distribution
    return (f"token {stats.tokens[i]!r} · score {score:.3f} · log p {stats.logprob[i]:.3f} · {moments} · "
            f"rank {int(stats.rank[i])} · top-1 {top1!r} (log p {stats.top1_logprob[i]:.3f})")


def token_spans(stats: TokenStats, token_scores: np.ndarray, selected: np.ndarray, scale: Scale, first: int,
                last: int, *, member_high: bool = True, decode: Callable[[int], str] | None = None) -> str:
    """Tokens [first, last) as coloured spans with their hover boxes, and the text between them, escaped."""
    offsets = stats.offsets.tolist()
    cursor = max((end for _, end in offsets[:first]), default=0)  # where the page before ended
    parts = []
    text = stats.text
    for i in range(first, last):
        start, end = offsets[i]
        start = max(start, cursor)  # byte-level pieces of one character share its span: show it once
        if end <= start:
            continue
        if start > cursor:
            parts.append(html.escape(text[cursor:start]))
        background = colour(float(token_scores[i]), *scale, member_high=member_high)
        style = f"background:{background};color:{text_colour(background)}"
        if selected[i]:
            style += ";outline:2px solid #111;outline-offset:-1px"
        tip = html.escape(token_tooltip(stats, i, float(token_scores[i]), decode), quote=True)
        parts.append(f'<span class="mia-tok" style="{style}" tabindex="0">{html.escape(text[start:end])}'
                     f'<textarea class="mia-tip" readonly rows="1" tabindex="-1">{tip}</textarea></span>')
        cursor = end
    if last == stats.n_scored:
        parts.append(html.escape(text[cursor:]))
    return "".join(parts)


def page_bounds(n: int, page: tuple[int, int] | None) -> tuple[int, int]:
    """The page's [first, last) clipped to the text and to MAX_HEATMAP_TOKENS (the first page by default)."""
    first, last = page if page is not None else (0, n)
    first = min(max(first, 0), n)
    return first, min(max(last, first), n, first + MAX_HEATMAP_TOKENS)


def heatmap_html(stats: TokenStats, token_scores: np.ndarray, selected: np.ndarray, *,
                 centre: float | None = None, scale: Scale | None = None, member_high: bool = True,
                 decode: Callable[[int], str] | None = None, element_id: str = "mia-heatmap", legend: bool = True,
                 page: tuple[int, int] | None = None, printed: bool = False) -> str:
    """The text of tokens [page) as coloured token spans (the first MAX_HEATMAP_TOKENS by default, never more), with
    the generic legend unless the caller draws its own. Colours on `scale` (low, centre, high) when given, else on
    the whole text's 5th–95th percentiles; user strings escaped. `printed`: the legend speaks of paper, not hovering."""
    scale = scale or colour_scale(np.asarray(token_scores, float), centre=centre)
    n = stats.n_scored
    first, last = page_bounds(n, page)
    body = token_spans(stats, token_scores, selected, scale, first, last, member_high=member_high, decode=decode)
    note = "" if (first, last) == (0, n) else (
        f'<div class="mia-heatmap-page" style="font-size:0.85em;color:#555">tokens {first:,}–{max(last - 1, first):,} '
        f'of {n:,} shown (at most {MAX_HEATMAP_TOKENS:,} at once)</div>')
    return (f'<div id="{html.escape(element_id, quote=True)}" class="mia-heatmap" style="white-space:pre-wrap;'
            f'font-family:ui-monospace,monospace;line-height:1.7;padding:0.5em;border:1px solid #ddd;border-radius:4px">'
            f'{body}</div>' + note + (legend_html(*scale, member_high=member_high, printed=printed) if legend else "")
            + TIP_CSS)


#: How to read a token's numbers on screen, and what stands for them on paper.
SCREEN_HINT = "Hover a token for its details; click it to keep them open and copy them."
PRINTED_HINT = ("Each token's background is its score on the bar above; the HTML report shows a token's numbers "
                "(log-probability, μ, σ, rank) when it is pointed at.")


def legend_html(low: float, centre: float, high: float, *, member_high: bool = True, colour_means: str = "",
                low_means: str = "", high_means: str = "", outlined: str = "tokens in the sequence score",
                scale_note: str = "", printed: bool = False) -> str:
    """The colour bar with its reference values, what each end means, the scale in use and the outline's meaning;
    on screen how to see a token's numbers, on paper (`printed`) what a token's colour is instead."""
    e = html.escape
    ends = (LOW, MID, HIGH) if member_high else (HIGH, MID, LOW)
    gradient = "linear-gradient(to right, " + ", ".join(f"rgb{c}" for c in ends) + ")"
    low_means = low_means or ("less member-like" if member_high else "member-like")
    high_means = high_means or ("more member-like" if member_high else "less member-like")
    red, blue = ("higher", "lower") if member_high else ("lower", "higher")
    red_means, blue_means = (high_means, low_means) if member_high else (low_means, high_means)
    return (
        '<div class="mia-legend" style="font-size:0.85em;margin-top:0.4em;line-height:1.5">'
        '<div style="display:flex;align-items:center;gap:0.6em;flex-wrap:wrap">'
        f'<span>{low:.2f}</span><span style="display:inline-block;width:14em;height:0.9em;background:{gradient};'
        f'border:1px solid #ccc"></span><span>{high:.2f}</span><span style="color:#555">(centre {centre:.2f})</span>'
        + '</div>' + (f'<div style="color:#555">Scale: {e(scale_note)}.</div>' if scale_note else "") + '<div>'
        + (f"Colour: {e(colour_means)}. " if colour_means else "")
        + f'<strong>Red</strong> = {red}: {e(red_means)}; <strong>blue</strong> = {blue}: {e(blue_means)}.</div>'
        f'<div><span style="outline:2px solid #111;padding:0 0.3em">Outlined</span>: {e(outlined)}. '
        + (PRINTED_HINT if printed else SCREEN_HINT) + '</div></div>')

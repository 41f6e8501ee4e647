"""A text's extraction as HTML: each character on the background of its highest p_z (log scale), the greedily
extractable passages outlined, the characters no suffix covers left plain and grey, and the legend of that scale.

The scale is its own (`palette.EXTRACTION_RGB`, yellow → green, one colour per decade from 10⁻⁸ to 1), never the
membership red/blue. Runs of characters that look alike (one colour, one greedy passage) are one span, so a page of
text is a few spans per window, not one per character: colours change only where a window's suffix begins or ends,
so a text has at most 2·windows + 1 of them. Every piece of the text is HTML-escaped, and its control and bidi
characters are shown as their escapes (`\\u202e`), so a text cannot reorder or hide what is drawn.
"""
from __future__ import annotations

import html
import math
import re

import numpy as np

from ..names import HIDDEN_CHARS, escaped
from ..palette import EXTRACTION_RGB
from .result import EXTRACTABLE, ExtractionResult

#: The low end of the scale: p_z ≤ 10⁻⁸, and p_z = 0, take its palest colour; the top end is p_z = 1.
FLOOR_LOG10 = -8
#: Characters that are not tested (in no window's suffix): plain text in this grey, no background.
UNTESTED_COLOUR = "#6b6b6b"
#: The outline of greedily extractable passages.
GREEDY_STYLE = "outline:2px solid #111;outline-offset:1px;border-radius:2px"
_HIDDEN = re.compile(f"[{HIDDEN_CHARS}]")
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
Rgb = tuple[int, int, int]


def visible(text: str) -> str:
    """Text as HTML: escaped, its control and bidi characters written as escapes (tab, newline and \\r kept)."""
    return html.escape(_HIDDEN.sub(lambda m: m.group() if m.group() == "\r" else escaped(m), text), quote=True)


def pz_rgb(log10_pz: float) -> Rgb:
    """The scale's colour of a p_z given as log10: the decades 10⁻⁸ … 1 at the palette's nine colours, linear in
    log10 p_z between them; anything at or below 10⁻⁸ (p_z = 0 too) the palest."""
    x = min(max(float(log10_pz), FLOOR_LOG10), 0.0)
    position = (x - FLOOR_LOG10) / -FLOOR_LOG10 * (len(EXTRACTION_RGB) - 1)
    i = min(int(position), len(EXTRACTION_RGB) - 2)
    t = position - i
    low, high = EXTRACTION_RGB[i], EXTRACTION_RGB[i + 1]
    return tuple(round(a + (b - a) * t) for a, b in zip(low, high))  # type: ignore[return-value]


def css(rgb: Rgb) -> str:
    """CSS rgb() of a colour."""
    return "rgb({},{},{})".format(*rgb)


def ink(rgb: Rgb) -> str:
    """Black or white text, whichever reads better on the background (relative luminance)."""
    r, g, b = rgb
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


def format_pz(log10_pz: float) -> str:
    """A p_z from its log10 for people: "0", "0.73", "3.2e-05", "4.1e-412" (far below a float's range too)."""
    if not math.isfinite(log10_pz):
        return "0"
    if log10_pz >= -3:
        return f"{10 ** log10_pz:.2g}"
    exponent = math.floor(log10_pz)
    mantissa = 10 ** (log10_pz - exponent)
    if round(mantissa, 1) >= 10:
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:.1f}e{exponent:+03d}"


def covered(result: ExtractionResult) -> np.ndarray:
    """(len(text),) bool: the characters inside some window's suffix (the others are never tested)."""
    edges = np.zeros(len(result.text) + 1, np.int64)
    np.add.at(edges, result.windows["suffix_char_start"].to_numpy(), 1)
    np.add.at(edges, result.windows["char_end"].to_numpy(), -1)
    return np.cumsum(edges[:-1]) > 0


def greedy_ids(result: ExtractionResult) -> np.ndarray:
    """(len(text),) int: the index of the greedily extractable passage each character is in, −1 where none."""
    out = np.full(len(result.text), -1, np.int64)
    for i, passage in enumerate(result.passages(greedy=True)):
        out[passage.start : passage.end] = i
    return out


def runs(result: ExtractionResult) -> list[tuple[int, int, Rgb | None, int, float]]:
    """The text cut where its look changes: (start, end, background colour or None (not tested), greedy passage or
    −1, highest log10 p_z) for each run, neighbours of one colour and one passage merged."""
    n = len(result.text)
    if n == 0:
        return []
    value, tested, passage = result.char_max_log10_pz(), covered(result), greedy_ids(result)
    change = np.flatnonzero((value[1:] != value[:-1]) | (tested[1:] != tested[:-1]) | (passage[1:] != passage[:-1]))
    starts = np.concatenate(([0], change + 1))
    ends = np.concatenate((starts[1:], [n]))
    out: list[tuple[int, int, Rgb | None, int, float]] = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        colour = pz_rgb(value[a]) if tested[a] else None
        if out and out[-1][2] == colour and out[-1][3] == passage[a]:
            last = out[-1]
            out[-1] = (last[0], b, colour, last[3], max(last[4], float(value[a])))
        else:
            out.append((a, b, colour, int(passage[a]), float(value[a])))
    return out


def run_span(text: str, colour: Rgb | None, log10_pz: float) -> str:
    """One run of characters as a span: its background and ink, and its p_z on hover."""
    if colour is None:
        return (f'<span class="mia-x-untested" style="color:{UNTESTED_COLOUR}" title="not tested: in no window\'s '
                f'suffix">{visible(text)}</span>')
    tip = f"highest p_z of the windows whose suffix covers it: {format_pz(log10_pz)}"
    return (f'<span class="mia-x" style="background:{css(colour)};color:{ink(colour)}" title="{tip}">'
            f'{visible(text)}</span>')


def extraction_html(result: ExtractionResult, *, element_id: str = "mia-extraction", legend: bool = True) -> str:
    """The text coloured by each character's highest p_z, greedy passages outlined, everything escaped; with the
    legend of the scale unless the caller draws its own."""
    parts: list[str] = []
    open_passage = -1
    for a, b, colour, passage, value in runs(result):
        if passage != open_passage:
            if open_passage >= 0:
                parts.append("</span>")
            if passage >= 0:
                parts.append(f'<span class="mia-x-greedy" style="{GREEDY_STYLE}">')
            open_passage = passage
        parts.append(run_span(result.text[a:b], colour, value))
    if open_passage >= 0:
        parts.append("</span>")
    body = (f'<div id="{html.escape(element_id, quote=True)}" class="mia-extraction" style="white-space:pre-wrap;'
            'font-family:ui-monospace,monospace;line-height:1.8;padding:0.5em;border:1px solid #ddd;border-radius:4px;'
            f'overflow-wrap:anywhere">{"".join(parts)}</div>')
    return body + (legend_html(result) if legend else "")


def legend_html(result: ExtractionResult) -> str:
    """The scale as nine labelled cells (one per decade), what the colour means, the untested look and the outline."""
    cells = []
    for exponent in range(FLOOR_LOG10, 1):
        rgb = pz_rgb(exponent)
        name = "1" if exponent == 0 else "10" + str(exponent).translate(_SUPERSCRIPT)
        name = f"≤ {name} or 0" if exponent == FLOOR_LOG10 else name
        cells.append(f'<span style="background:{css(rgb)};color:{ink(rgb)};padding:0.1em 0.45em;'
                     f'border:1px solid #ccc">{name}</span>')
    s = result.settings
    return (
        '<div class="mia-x-legend" style="font-size:0.85em;margin-top:0.4em;line-height:1.6">'
        '<div style="display:flex;flex-wrap:wrap;gap:0;align-items:center">'
        '<span style="margin-right:0.5em">p_z (log scale):</span>' + "".join(cells) + '</div>'
        f'<div>Colour: the highest p_z of the windows whose suffix covers the character — the probability that '
        f'top-{s.top_k} sampling at temperature {s.temperature:g} reproduces that {s.suffix}-token suffix word for '
        f'word from the {s.prefix} tokens before it. p_z ≥ {EXTRACTABLE:g} counts as extractable. This scale is not '
        'the membership colours (red/blue): it is a fact about the model, not a membership score.</div>'
        f'<div><span style="color:{UNTESTED_COLOUR};border:1px dashed #bbb;padding:0 0.3em">Grey text, no '
        'background</span>: not tested (in no window\'s suffix: the first prefix of the text is only ever given, '
        f'never asked for). <span style="{GREEDY_STYLE};padding:0 0.3em;margin-left:0.3em">Outlined</span>: '
        'greedily extractable (greedy decoding from the prefix reproduces every suffix token). Hover the text for '
        'its p_z.</div></div>')

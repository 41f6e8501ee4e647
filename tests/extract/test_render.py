"""The extraction view's HTML and strip plot on hand-sized results: each character's colour against ColorBrewer's
YlGn read from plotly (one decade a colour), characters in no suffix plain, outlines on exactly the greedy passages,
runs of one look in one span, a hostile text escaped, and the strip plot's points, floor and lines."""
from __future__ import annotations

import math
from html.parser import HTMLParser

import numpy as np
import plotly.colors
import pytest

from mia_core.extract.figure import ZERO_NAME, strip_figure, zero_floor
from mia_core.extract.render import UNTESTED_COLOUR, extraction_html, format_pz, legend_html, pz_rgb
from mia_core.extract.result import ExtractionResult, window_table
from mia_core.extract.settings import ExtractionSettings

SETTINGS = ExtractionSettings(prefix=2, suffix=2, stride=1)
#: ColorBrewer YlGn, 9 classes, as plotly ships it: 10⁻⁸, 10⁻⁷, … 1.
YLGN = [tuple(int(v) for v in c[4:-1].split(",")) for c in plotly.colors.sequential.YlGn]


def hand_result(text: str, suffixes: list[tuple[int, int]], log10_pz: list[float],
                greedy: list[bool]) -> ExtractionResult:
    """A result with windows whose suffixes cover the given [start, end) characters (prefix 2 characters before)."""
    spans = {"token_start": np.arange(len(suffixes)), "char_start": np.array([max(a - 2, 0) for a, _ in suffixes]),
             "suffix_char_start": np.array([a for a, _ in suffixes]), "char_end": np.array([b for _, b in suffixes])}
    table = window_table(spans, SETTINGS, np.array(log10_pz, float), np.array(greedy))
    return ExtractionResult(text, SETTINGS, table, n_text_tokens=len(suffixes) + 3)


class Spans(HTMLParser):
    """Each character of the text body with the style of the innermost span it is in and whether a greedy outline
    wraps it; the number of coloured or untested spans."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[dict] = []
        self.chars: list[tuple[str, str, bool]] = []
        self.runs = 0
        self.in_body = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("class") == "mia-extraction":
            self.in_body = True
        if tag == "span" and self.in_body:
            self.stack.append(attrs)
            self.runs += attrs.get("class") in ("mia-x", "mia-x-untested")
        elif tag == "div" and self.in_body and attrs.get("class") != "mia-extraction":
            self.in_body = False

    def handle_endtag(self, tag):
        if tag == "span" and self.in_body:
            self.stack.pop()
        elif tag == "div":
            self.in_body = False

    def handle_data(self, data):
        if not self.in_body:
            return
        style = self.stack[-1]["style"] if self.stack else ""
        greedy = any(a.get("class") == "mia-x-greedy" for a in self.stack)
        self.chars.extend((ch, style, greedy) for ch in data)


def parse(html_text: str) -> Spans:
    parser = Spans()
    parser.feed(html_text)
    return parser


def background(style: str) -> tuple[int, int, int] | None:
    for part in style.split(";"):
        if part.startswith("background:rgb("):
            return tuple(int(v) for v in part[len("background:rgb("):-1].split(","))
    return None


def test_whole_decades_take_colorbrewer_ylgn_and_between_them_the_log_midpoint():
    for i, exponent in enumerate(range(-8, 1)):
        assert pz_rgb(exponent) == YLGN[i]
    assert pz_rgb(-30) == pz_rgb(-math.inf) == YLGN[0]  # below the floor, and p_z = 0: the palest
    assert pz_rgb(0.0) == YLGN[-1]
    mid = pz_rgb(math.log10(math.sqrt(1e-3 * 1e-2)))  # halfway between 10⁻³ and 10⁻² in log10
    assert mid == tuple(round((a + b) / 2) for a, b in zip(YLGN[5], YLGN[6]))


def test_each_character_is_coloured_by_its_highest_covering_window_and_untested_ones_are_grey():
    text = "abcdefghijklmnopqrst"
    # windows' suffixes: [2,8) p 1e-3; [5,11) p 0.5 (greedy); [14,18) p = 0. Characters 0-1, 11-13, 18-19 untested.
    result = hand_result(text, [(2, 8), (5, 11), (14, 18)], [-3.0, math.log10(0.5), -math.inf], [False, True, False])
    chars = parse(extraction_html(result, legend=False)).chars
    assert "".join(c for c, _, _ in chars) == text
    best = np.full(len(text), -np.inf)
    tested = np.zeros(len(text), bool)
    for (a, b), v in zip([(2, 8), (5, 11), (14, 18)], [-3.0, math.log10(0.5), -math.inf]):
        for i in range(a, b):
            best[i], tested[i] = max(best[i], v), True
    for i, (_, style, _) in enumerate(chars):
        if tested[i]:
            assert background(style) == pz_rgb(best[i]), i
        else:
            assert background(style) is None and f"color:{UNTESTED_COLOUR}" in style, i
    assert background(chars[3][1]) == YLGN[5]  # 10⁻³ exactly: the sixth colour
    assert background(chars[15][1]) == YLGN[0]  # p_z = 0 but tested: the palest colour, not grey


def test_greedy_outlines_wrap_exactly_the_greedy_passages():
    text = "0123456789abcdefghijklmnopqrstuvwxyz"
    suffixes = [(2, 6), (5, 9), (12, 16), (20, 24), (23, 27), (30, 34)]
    greedy = [True, True, False, True, False, True]
    result = hand_result(text, suffixes, [-0.1, -0.2, -4.0, -0.05, -1.0, -0.01], greedy)
    chars = parse(extraction_html(result, legend=False)).chars
    outlined = {i for i, (_, _, g) in enumerate(chars) if g}
    expected = set(range(2, 9)) | set(range(20, 24)) | set(range(30, 34))  # greedy suffixes, overlapping ones merged
    assert outlined == expected
    html_text = extraction_html(result, legend=False)
    assert html_text.count('class="mia-x-greedy"') == 3  # one outline per merged passage


def test_runs_of_one_look_are_one_span():
    text = "x" * 60
    # five windows, each suffix 10 characters, stride 10 from 10: values make 5 distinct colours, then a repeat
    suffixes = [(10, 20), (20, 30), (30, 40), (40, 50), (50, 60)]
    result = hand_result(text, suffixes, [-2.0, -2.0, -5.0, -5.0, -7.0], [False] * 5)
    parsed = parse(extraction_html(result, legend=False))
    assert parsed.runs == 4  # untested [0,10), 1e-2 [10,30), 1e-5 [30,50), 1e-7 [50,60)
    book = hand_result("y" * 2000, [(a, a + 50) for a in range(100, 1950, 50)], [-3.0] * 37, [False] * 37)
    assert parse(extraction_html(book, legend=False)).runs == 3  # untested head, one colour, untested tail


def test_a_hostile_text_is_escaped_and_its_bidi_characters_shown_as_escapes():
    text = "<script>alert(1)</script> \u202eevil\u2066 & \"q\" 'a'\n<img src=x onerror=alert(2)>"
    n = len(text)
    result = hand_result(text, [(0, 20), (15, n)], [-0.1, -9.0], [True, False])
    out = extraction_html(result)
    assert "<script>" not in out and "<img" not in out and "\u202e" not in out and "\u2066" not in out
    assert "&lt;script&gt;" in out and "\\u202eevil\\u2066" in out and "&amp;" in out and "&quot;q&quot;" in out
    shown = "".join(c for c, _, _ in parse(out).chars)
    assert shown == text.replace("\u202e", "\\u202e").replace("\u2066", "\\u2066")


def test_the_legend_gives_the_nine_decades_the_untested_look_and_the_settings():
    result = hand_result("abcdef", [(2, 6)], [-1.0], [False])
    legend = legend_html(result)
    for i, name in enumerate(["≤ 10⁻⁸ or 0", "10⁻⁷", "10⁻⁶", "10⁻⁵", "10⁻⁴", "10⁻³", "10⁻²", "10⁻¹", "1"]):
        assert f"background:rgb({','.join(map(str, YLGN[i]))})" in legend and f">{name}</span>" in legend
    assert "not tested" in legend and "Outlined" in legend and "top-40 sampling at temperature 1" in legend


@pytest.mark.parametrize("log10_pz, shown", [(-math.inf, "0"), (math.log10(0.73), "0.73"), (-4.5, "3.2e-05"),
                                             (-412.96, "1.1e-413"), (-2.99999, "0.001")])
def test_format_pz(log10_pz, shown):
    assert format_pz(log10_pz) == shown


def test_the_strip_plot_puts_each_window_at_its_suffix_and_p_z_zero_on_its_floor():
    result = hand_result("abcdefghijklmnop", [(2, 6), (4, 8), (6, 10), (8, 12)], [-0.1, -12.5, -math.inf, -3.0],
                         [True, False, False, False])
    fig = strip_figure(result)
    traces = {t.name: t for t in fig.data}
    greedy = next(t for n, t in traces.items() if n.startswith("greedy"))
    assert list(greedy.x) == [0 + 2] and list(greedy.y) == [-0.1]  # x: the suffix's first token (start + prefix)
    assert list(traces["p_z > 0"].x) == [3, 5] and list(traces["p_z > 0"].y) == [-12.5, -3.0]
    floor = zero_floor(result.windows["log10_pz"].to_numpy())
    assert floor < -13 and list(traces[ZERO_NAME].x) == [4] and list(traces[ZERO_NAME].y) == [floor]
    lines = sorted(s.y0 for s in fig.layout.shapes)
    assert lines == pytest.approx([-2.0, math.log10(0.5)])
    assert fig.layout.yaxis.ticktext[0] == "p_z = 0" and fig.layout.yaxis.tickvals[0] == floor


def test_strip_plot_hover_escapes_the_text():
    text = "<b>bold</b> \u202emore text here"
    result = hand_result(text, [(0, len(text))], [-1.0], [False])
    hover = strip_figure(result).data[0].text[0]
    assert "<b>bold" not in hover and "&lt;b&gt;bold" in hover and "\\u202e" in hover and "\u202e" not in hover

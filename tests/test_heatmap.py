"""Heatmap HTML: escaping, whitespace, hover boxes, colours (one meaning: red = member-like), scales, legends."""
from __future__ import annotations

import html
import re

import numpy as np

from mia_core import METHODS, TokenStats, score
from mia_core.heatmap import colour, colour_scale, fixed_scale, heatmap_html, legend_html, reference_scale
from mia_core.palette import HIGH_RGB, LOW_RGB, MID_RGB

SPAN_COLOUR = re.compile(r'<span class="mia-tok" style="background:(rgb\([^)]*\))')


def hand_stats(words: list[str], logprob: list[float]) -> TokenStats:
    """Statistics of a text of word tokens with the given log p (no model)."""
    tokens = [w if i == 0 else " " + w for i, w in enumerate(words)]
    ends = np.cumsum([len(t) for t in tokens])
    n = len(tokens)
    lp = np.asarray(logprob, dtype=np.float64)
    return TokenStats(text="".join(tokens), token_ids=np.arange(n), tokens=tokens,
                      offsets=np.stack([ends - [len(t) for t in tokens], ends], axis=1), logprob=lp, mu=lp - 0.5,
                      sigma=np.ones(n), top1_id=np.zeros(n, int), top1_logprob=np.zeros(n), entropy=np.ones(n),
                      rank=np.ones(n, int))


def test_heatmap_escapes_user_text_and_keeps_whitespace(llama_lm):
    text = 'Hi <script>alert("x")</script> & bye\n\n  indented'
    stats = llama_lm.token_stats([text], cache=False)[0]
    s = score("min_k", stats, k=0.2)
    page = heatmap_html(stats, s.token_scores, s.selected, decode=llama_lm.tokenizer.decode)
    assert "<script" not in page and "</script" not in page and "&lt;" in page  # tokens may split the tag
    visible = re.sub(r"<[^>]+>", "", page.split('<div class="mia-legend"')[0])
    assert html.unescape(visible) == text  # every character shown once, newlines and spaces kept; tips are attributes
    assert page.split("mia-legend")[0].count("outline:2px") == int(s.selected.sum())
    assert page.count('class="mia-tok"') == stats.n_scored == page.count('class="mia-tip" readonly')
    assert "mia-legend" in page and "white-space:pre-wrap" in page
    assert " title=" not in page and ".mia-tok:hover>.mia-tip" in page  # a styled box, not the native tooltip


def test_hover_box_holds_the_tokens_statistics():
    stats = hand_stats(["a", "b<c"], [-1.25, -2.5])
    page = heatmap_html(stats, stats.logprob, np.array([True, False]), decode=lambda i: "<top>")
    tips = [html.unescape(t) for t in re.findall(r'value="([^"]*)"', page)]
    assert tips[1] == ("token ' b<c' · score -2.500 · log p -2.500 · μ -3.000 · σ 1.000 · rank 1 · "
                       "top-1 '<top>' (log p 0.000)")
    assert "<top>" not in page and "b<c" not in page  # escaped in the attribute too


def test_colour_scale_is_diverging_with_red_at_the_member_like_end():
    assert colour(0.0, -1, 0, 1) == "rgb(247,247,247)" == "rgb{}".format(MID_RGB).replace(" ", "")
    assert colour(5.0, -1, 0, 1) == "rgb(178,24,43)" == "rgb{}".format(HIGH_RGB).replace(" ", "")  # high: red
    assert colour(-1.0, -1, 0, 1) == "rgb(33,102,172)" == "rgb{}".format(LOW_RGB).replace(" ", "")
    # by hand: 247 + (178 − 247)·0.2 = 233.2, 247 − 223·0.2 = 202.4, 247 − 204·0.2 = 206.2
    assert colour(0.2, -3, 0, 1) == "rgb(233,202,206)"
    # the low side spans 3: −0.6 is t = 0.2 towards blue: 247 − 214·0.2, 247 − 145·0.2, 247 − 75·0.2
    assert colour(-0.6, -3, 0, 1) == "rgb(204,218,232)"
    # where low scores are member-like (ReCaLL), the low end is red
    assert colour(-1.0, -1, 0, 1, member_high=False) == "rgb(178,24,43)"
    assert colour(1.0, -1, 0, 1, member_high=False) == "rgb(33,102,172)"


def test_scales_fixed_this_text_and_reference():
    assert fixed_scale((-6.0, 0.0)) == (-6.0, -3.0, 0.0)  # centre: the midpoint unless the method has one
    assert fixed_scale((-3.0, 1.0), centre=0.0) == (-3.0, 0.0, 1.0)
    low, centre, high = reference_scale([np.arange(0.0, 51.0), np.arange(51.0, 101.0)])  # 0 … 100 pooled
    assert (low, centre, high) == (5.0, 50.0, 95.0)
    assert colour_scale(np.arange(0.0, 101.0), centre=10.0) == (5.0, 10.0, 95.0)


def test_the_same_score_gets_the_same_colour_across_texts_under_the_fixed_scale():
    """Two texts share a token of log p −1.5; the fixed scale (min_k's declared range) colours it alike, each text's
    own scale does not."""
    one = hand_stats(["the", "cat", "sat"], [-1.5, -0.2, -4.0])
    two = hand_stats(["a", "dog", "ran", "far"], [-9.0, -1.5, -7.5, -8.0])
    fixed = fixed_scale(METHODS["min_k"].token_range, centre=METHODS["min_k"].centre)
    colours = [SPAN_COLOUR.findall(heatmap_html(s, s.logprob, np.zeros(s.n_scored, bool), scale=fixed))
               for s in (one, two)]
    # by hand on (−6, −3, 0): −1.5 is t = 0.5 towards red: 247 − 69·0.5 = 212.5 → 212 (half to even), 135.5 → 136, 145
    assert colours[0][0] == colours[1][1] == "rgb(212,136,145)"
    own = [SPAN_COLOUR.findall(heatmap_html(s, s.logprob, np.zeros(s.n_scored, bool))) for s in (one, two)]
    assert own[0][0] != own[1][1]


def test_legend_says_which_end_is_member_like_and_which_scale_is_on():
    plain = re.sub(r"<[^>]+>", "", legend_html(-6, -3, 0, scale_note="fixed for Min-K% Prob: -6 to 0"))
    assert "Red = higher: more member-like; blue = lower: less member-like." in plain
    assert "Scale: fixed for Min-K% Prob: -6 to 0." in plain and "(centre -3.00)" in plain
    recall = re.sub(r"<[^>]+>", "", legend_html(-2, 0, 2, member_high=False, low_means="the prefix cost it",
                                                high_means="the prefix helped it"))
    assert "Red = lower: the prefix cost it; blue = higher: the prefix helped it." in recall
    gradient = re.search(r"linear-gradient\(to right, ([^)]*\)), ([^)]*\)), ([^)]*\))\)", legend_html(-1, 0, 1))
    assert gradient.group(1) == f"rgb{LOW_RGB}" and gradient.group(3) == f"rgb{HIGH_RGB}"  # blue left, red right

"""Heatmaps (`mia_core.heatmap`): escaping, whitespace, hover boxes, colours (one meaning: red = member-like), scales,
legends, a method's panel on each scale against hand-computed percentiles, and the standalone page (escaped,
stamped)."""
from __future__ import annotations

import dataclasses
import hashlib
import html
import re

import numpy as np
import pytest

from mia_core import METHODS, Score, TokenStats, score
from mia_core.heatmap import (
    colour, colour_scale, fixed_scale, heatmap_document, heatmap_html, legend_html, make_panel, panel_html,
    reference_scale,
)
from mia_core.palette import HIGH_RGB, LOW_RGB, MID_RGB
from mia_core.stamp import stamp_for

from tests.test_limits import word_stats

#: A token's hover box and its text (the details, escaped).
TIP = re.compile(r'<textarea class="mia-tip"[^>]*>([^<]*)</textarea>')
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
    body = page.split('<div class="mia-legend"')[0]
    visible = re.sub(r"<[^>]+>", "", TIP.sub("", body))
    assert html.unescape(visible) == text  # every character shown once, newlines and spaces kept; tips aside
    assert page.split("mia-legend")[0].count("outline:2px") == int(s.selected.sum())
    assert page.count('class="mia-tok"') == stats.n_scored == page.count('<textarea class="mia-tip" readonly')
    assert body.count("</textarea>") == stats.n_scored  # a token's text, escaped in its tip, cannot end it early
    assert "mia-legend" in page and "white-space:pre-wrap" in page
    assert " title=" not in page and ".mia-tok:hover>.mia-tip" in page  # a styled box, not the native tooltip


def test_hover_box_holds_the_tokens_statistics():
    stats = hand_stats(["a", "b<c"], [-1.25, -2.5])
    page = heatmap_html(stats, stats.logprob, np.array([True, False]), decode=lambda i: "<top>")
    tips = [html.unescape(t) for t in TIP.findall(page)]
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


def hand_score(token_scores: list[float]) -> Score:
    """A score with the given token scores (none selected), as a method would return it."""
    values = np.asarray(token_scores, dtype=np.float64)
    return Score(float(values.mean()), values, np.zeros(values.size, bool))


#: Five token scores; sorted −4 … 0, numpy's linear percentiles by hand: 5th at rank 0.05·4 = 0.2 → −4 + 0.2 = −3.8,
#: 95th at rank 3.8 → −1 + 0.8 = −0.2.
FIVE = [-4.0, -1.0, -2.0, 0.0, -3.0]


def test_panel_on_this_texts_scale_spans_its_5th_to_95th_percentile():
    panel = make_panel("loss", hand_score(FIVE), scale="text")
    assert panel.scale == pytest.approx((-3.8, -2.0, -0.2))  # loss has no centre: the midpoint −2.0
    assert panel.scale_note == "this text: its 5th–95th percentile"
    centred = make_panel("min_k_pp", hand_score(FIVE), scale="text")  # Min-K%++ is centred at 0
    assert centred.scale == pytest.approx((-3.8, 0.0, 1e-9))  # widened so that the centre sits inside


def test_panel_on_the_fixed_scale_is_the_declared_range_whatever_the_text():
    loss = make_panel("loss", hand_score(FIVE), scale="fixed")
    assert loss.scale == (-6.0, -3.0, 0.0) and loss.scale_note == "fixed for Loss (−mean NLL): -6 to 0"
    zpp = make_panel("min_k_pp", hand_score([5.0, 7.0]), scale="fixed")
    assert zpp.scale == (-3.0, 0.0, 1.0) and zpp.scale_note == "fixed for Min-K%++: -3 to 1"
    # a method declaring no range falls back to the text's own, and says so
    infilling = make_panel("infilling", hand_score(FIVE), scale="fixed")
    assert infilling.scale == pytest.approx((-3.8, 0.0, 1e-9))  # centre 0 above the 95th percentile −0.2: widened
    assert infilling.scale_note == "this text's 5th–95th percentile (Infilling Score declares no fixed range)"


def test_panel_on_the_reference_scale_pools_the_reference_token_scores():
    # 0 … 100 pooled over two texts (a NaN left out): percentiles 5 and 95 exactly, the midpoint 50
    reference = [np.arange(0.0, 51.0), np.append(np.arange(51.0, 101.0), np.nan)]
    panel = make_panel("loss", hand_score(FIVE), scale="reference", reference_token_scores=reference,
                       reference_source="the demo's known non-members")
    assert panel.scale == (5.0, 50.0, 95.0)
    assert panel.scale_note == "fixed: 5th–95th percentile of the token scores of 2 of the demo's known non-members"
    unmet = make_panel("loss", hand_score(FIVE), scale="reference")  # no reference texts: the fixed range, said so
    assert unmet.scale == (-6.0, -3.0, 0.0)
    assert unmet.scale_note == "fixed for Loss (−mean NLL): -6 to 0 (no known non-members with their texts chosen below)"
    with pytest.raises(ValueError, match="scale must be one of fixed, reference, text"):
        make_panel("loss", hand_score(FIVE), scale="own")


def test_panel_takes_its_legend_words_from_the_methods_token_view():
    view = METHODS["recall"].view
    panel = make_panel("recall", hand_score([-1.0, 0.5, 1.5]), scale="fixed")
    assert (panel.label, panel.member_high, panel.colour_means, panel.low_means, panel.high_means, panel.outlined) == (
        "ReCaLL", False, view.colour, view.low, view.high, view.outlined)
    assert panel.scale == (-2.0, 0.0, 2.0)
    stats = hand_stats(["a", "b", "c"], [-1.0, 0.5, 1.5])
    plain = html.unescape(re.sub(r"<[^>]+>", "", panel_html(stats, panel, None, None)))
    assert f"Red = lower: {view.low}" in plain and "Scale: fixed for ReCaLL: -2 to 2." in plain
    # −1 on (−2, 0, 2) with low scores member-like: t = 0.5 towards red, as `colour` computes by hand above
    assert SPAN_COLOUR.findall(panel_html(stats, panel, None, None))[0] == "rgb(212,136,145)"


HOSTILE = 'Hi <script>alert("x")</script> =SUM(A1) & -5 bye'


def test_heatmap_document_is_standalone_escaped_and_stamped(llama_lm):
    stats = llama_lm.token_stats([HOSTILE], cache=False)[0]
    stamp = stamp_for("<b>model</b>", "f" * 40, HOSTILE, "auto", k=0.2)
    panel = make_panel("min_k", score("min_k", stats, k=0.2), scale="fixed")
    page = heatmap_document(stats, [panel], stamp, llama_lm.tokenizer.decode)
    assert page.startswith("<!doctype html>") and page.endswith("</html>")
    assert "<script" not in page.lower() and "<b>model</b>" not in page and "&lt;b&gt;model&lt;/b&gt;" in page
    assert "<link" not in page and "src=" not in page  # one file: inline CSS, nothing fetched
    digest = hashlib.sha256(HOSTILE.encode()).hexdigest()
    assert f"sha256 {digest[:8]}" in page and "BOS auto, k 0.2" in page and "ffffffffffff" in page
    assert page.count('class="mia-tok"') == stats.n_scored and "Scale: fixed for Min-K% Prob: -6 to 0." in page
    body = page.split('<div id="heatmap-0" class="mia-heatmap">')[1].split('</div><div class="mia-legend"')[0]
    assert html.unescape(re.sub(r"<[^>]+>", "", TIP.sub("", body))) == HOSTILE  # the whole text, once, escaped


def test_a_printed_heatmap_says_what_colours_mean_instead_of_how_to_hover():
    """On paper there is no pointer: the PDF's legend says what a token's colour is, the web page how to see its numbers."""
    stats = word_stats(12, seed=3)
    chosen = np.zeros(12, bool)
    screen = heatmap_html(stats, stats.logprob, chosen)
    paper = heatmap_html(stats, stats.logprob, chosen, printed=True)
    assert "Hover a token" in screen and "its score on the bar above" not in screen
    assert "Hover" not in paper and "click" not in paper and "Each token's background is its score on the bar above" in paper


def test_a_token_without_mu_and_sigma_says_the_server_did_not_return_them():
    """A served model asked for top log-probs gives no μ or σ: its tooltips say so instead of "μ nan · σ nan"."""
    stats = word_stats(5, seed=4)
    served = dataclasses.replace(stats, mu=np.full(5, np.nan), sigma=np.full(5, np.nan))
    page = heatmap_html(served, served.logprob, np.zeros(5, bool))
    assert "nan" not in page.lower() and page.count("μ, σ: not returned by this server") == 5
    assert f"μ {stats.mu[0]:.3f} · σ {stats.sigma[0]:.3f}" in heatmap_html(stats, stats.logprob, np.zeros(5, bool))

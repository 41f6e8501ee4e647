"""Heatmap HTML: escaping, whitespace, colours, outlines."""
from __future__ import annotations

import re

from mia_core import score
from mia_core.heatmap import colour, heatmap_html


def test_heatmap_escapes_user_text_and_keeps_whitespace(llama_lm):
    text = 'Hi <script>alert("x")</script> & bye\n\n  indented'
    stats = llama_lm.token_stats([text], cache=False)[0]
    s = score("min_k", stats, k=0.2)
    page = heatmap_html(stats, s.token_scores, s.selected, decode=llama_lm.tokenizer.decode)
    assert "<script" not in page and "</script" not in page and "&lt;" in page  # tokens may split the tag
    visible = re.sub(r"<[^>]+>", "", page.split('<div class="mia-legend"')[0])
    import html

    assert html.unescape(visible) == text  # every character shown once, newlines and spaces kept
    assert page.split("mia-legend")[0].count("outline:2px") == int(s.selected.sum())
    assert page.count('class="mia-tok"') == stats.n_scored
    assert "mia-legend" in page and "white-space:pre-wrap" in page


def test_colour_scale_is_diverging():
    assert colour(0.0, -1, 0, 1) == "rgb(247,247,247)"
    assert colour(-5.0, -1, 0, 1) == "rgb(178,24,43)"
    assert colour(1.0, -1, 0, 1) == "rgb(33,102,172)"

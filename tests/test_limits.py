"""Request bounds (`mia_core.limits`): their checks at the edges, run ids, and heatmaps drawn a page at a time."""
from __future__ import annotations

import hashlib
import html
import re
from pathlib import Path

import numpy as np
import pytest

from mia_core import TokenStats
from mia_core import limits
from mia_core.heatmap import colour, colour_scale, heatmap_html
from mia_core.inputs import limits as file_limits

ROOT = Path(__file__).resolve().parents[1]


def word_stats(n: int, seed: int = 0) -> TokenStats:
    """Statistics of a text of `n` word tokens (" w0 w1 …" spans), random log p: no model needed."""
    rng = np.random.default_rng(seed)
    tokens = [f"w{i}" if i == 0 else f" w{i}" for i in range(n)]
    ends = np.cumsum([len(t) for t in tokens])
    logprob = -rng.exponential(2.0, n)
    return TokenStats(text="".join(tokens) + "\nend", token_ids=np.arange(n), tokens=tokens,
                      offsets=np.stack([ends - [len(t) for t in tokens], ends], axis=1), logprob=logprob,
                      mu=logprob - 0.5, sigma=np.ones(n), top1_id=np.zeros(n, int), top1_logprob=np.zeros(n),
                      entropy=np.ones(n), rank=np.ones(n, int))


#: A token's hover box: its details as the text of a read-only textarea (escaped), shown only on hover.
TIP = re.compile(r'<textarea class="mia-tip"[^>]*>[^<]*</textarea>')


def visible(page: str) -> str:
    """The text a heatmap shows: its body without tags and hover boxes, entities decoded."""
    body = page.split('<div class="mia-heatmap-page"')[0].split('<div class="mia-legend"')[0]
    return html.unescape(re.sub(r"<[^>]+>", "", TIP.sub("", body)))


def test_request_chars_are_bounded_over_all_texts():
    limits.check_request_chars(["x" * limits.MAX_REQUEST_CHARS])
    limits.check_request_chars(["x" * 150_000, "y" * 50_000])  # exactly at the bound
    with pytest.raises(limits.RequestTooLarge, match="200,001 characters, over the 200,000"):
        limits.check_request_chars(["x" * 150_000, "y" * 50_001])


def test_upload_sets_are_bounded_in_files_and_bytes():
    limits.check_upload_set([1] * limits.MAX_UPLOAD_FILES)
    with pytest.raises(limits.RequestTooLarge, match="101 files"):
        limits.check_upload_set([1] * (limits.MAX_UPLOAD_FILES + 1))
    limits.check_upload_set([limits.MAX_UPLOAD_SET_BYTES // 2] * 2)
    with pytest.raises(limits.RequestTooLarge, match="200 MB"):
        limits.check_upload_set([limits.MAX_UPLOAD_SET_BYTES // 2, limits.MAX_UPLOAD_SET_BYTES // 2 + 1])


def test_run_ids():
    derived = hashlib.sha256(b"any plan").hexdigest()[:12]  # how audit.jobs derives an id
    for good in (derived, "my-job_2024.v1", "a" * 64):
        assert limits.is_run_id(good), good
    for bad in ("", "a" * 65, "../store", "-x", ".hidden", "a b", "`x`**b**", "<b>x</b>", "x\ny", None, 12):
        assert not limits.is_run_id(bad), bad


def test_heatmap_draws_one_page_of_a_long_text_and_pages_cover_it_exactly():
    n = 5_000
    stats = word_stats(n)
    values = stats.logprob
    selected = values < np.quantile(values, 0.2)
    whole = heatmap_html(stats, values, selected)  # no page asked: the first page only, never the whole text
    assert whole.count('class="mia-tok"') == limits.MAX_HEATMAP_TOKENS
    assert f"tokens 0–1,999 of {n:,} shown" in whole
    pages = limits.heatmap_pages(n)
    assert pages == [(0, 2000), (2000, 4000), (4000, 5000)]
    drawn = [heatmap_html(stats, values, selected, page=p) for p in pages]
    assert sum(d.count('class="mia-tok"') for d in drawn) == n
    assert "".join(visible(d) for d in drawn) == stats.text  # every character once, the tail on the last page
    # colours come from the whole text's scale, not the page's: token 4321 on the third page
    low, mid, high = colour_scale(values)
    span = re.findall(r'<span class="mia-tok" style="background:(rgb\([^)]*\))', drawn[2])[4321 - 4000]
    assert span == colour(float(values[4321]), low, mid, high)
    assert heatmap_html(stats, values, selected, page=(0, n)).count('class="mia-tok"') == limits.MAX_HEATMAP_TOKENS


def test_heatmap_html_of_a_50k_token_text_stays_small():
    stats = word_stats(50_000, seed=1)
    page = heatmap_html(stats, stats.logprob, np.zeros(50_000, bool))
    assert len(page.encode()) < 1_000_000  # one page; the whole text drawn at once was ~12 MB


def test_security_md_lists_every_bound():
    text = (ROOT / "docs" / "security.md").read_text()
    names = [n for module in (limits, file_limits) for n in vars(module) if n.startswith("MAX_")]
    assert len(names) >= 14
    missing = [n for n in names if f"`{n}`" not in text]
    assert not missing, missing


def test_a_bound_names_the_device_it_applies_to_and_never_guesses_a_served_ones():
    assert limits.bound_place("cpu") == "this server's CPU"
    assert limits.bound_place("cuda") == limits.bound_place("mps") == "this server's GPU"
    served = limits.bound_place("served")  # a vLLM server does not say whether it runs on a GPU
    assert "GPU" not in served and "CPU" not in served and "not reported" in served

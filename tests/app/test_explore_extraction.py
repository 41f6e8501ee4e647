"""Explore's extraction view through AppTest with a tiny model trained on pieces of one text (so some of its windows
are extractable and some not): the cost line before anything runs (windows counted here from the token count),
nothing computed before the button, the summary, outlines and longest passage equal to `extract_texts`' own on the
same text, the result greyed once its settings change, and a text shorter than one window told so."""
from __future__ import annotations

import html
import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import ui.explore_extraction

from mia_core import load_model
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.extract.result import THRESHOLDS
from mia_core.limits import MAX_REQUEST_TOKEN_PASSES_CPU
from ui.markdown import md

from tests.extract.test_extraction import passages_at_every_word
from tests.support.app import app
from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer, train_causal_lm

pytestmark = pytest.mark.integration  # the app opens with the cached demo model first

SMALL = {"explore_x_prefix": 8, "explore_x_suffix": 6, "explore_x_stride": 3}
#: The text the model learned (in pieces), then one it never saw: 73 windows of 14 tokens.
LEARNED, UNSEEN = random_texts(2, seed=11, min_words=28, max_words=32)
TEXT = LEARNED + " " + UNSEEN


@pytest.fixture(scope="module")
def memorised_dir(tmp_path_factory) -> Path:
    """A tiny Llama trained (45 steps) on every other 10-word piece of LEARNED, saved as a model folder: about half
    the windows of TEXT reach p_z ≥ 10⁻³, an eighth p_z ≥ 0.5, a quarter are greedy."""
    tok = tiny_tokenizer(300)
    folder = tmp_path_factory.mktemp("memorised-model")
    pieces = passages_at_every_word(LEARNED, words=10)[::2]
    train_causal_lm(tiny_llama(len(tok), seed=2), tok, pieces, steps=45, lr=1e-2).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def open_page(folder: Path) -> AppTest:
    at = app()
    at.radio(key="model_choice").set_value("other").run()
    at.text_input(key="model_other").input(str(folder)).run()
    at.switch_page("app_pages/explore.py").run()
    assert not at.exception, at.exception
    return at


def open_extraction(folder: Path, text: str) -> AppTest:
    at = open_page(folder)
    at.text_area(key="explore_text").input(text).run()
    for key, value in SMALL.items():
        at.number_input(key=key).set_value(value).run()
    assert not at.exception, at.exception
    return at


def expected_windows(n_tokens: int, window: int, stride: int) -> int:
    """Windows starting every `stride` tokens that fit, plus one ending at the last token when the stride skips it."""
    if n_tokens < window:
        return 0
    fitting = (n_tokens - window) // stride + 1
    return fitting + (1 if (fitting - 1) * stride != n_tokens - window else 0)


def test_extraction_shows_its_cost_first_then_the_same_numbers_as_extract_texts(memorised_dir, monkeypatch):
    calls = []
    original = ui.explore_extraction.extract_texts
    monkeypatch.setattr(ui.explore_extraction, "extract_texts", lambda *a, **k: calls.append(1) or original(*a, **k))
    at = open_extraction(memorised_dir, TEXT)
    n_tokens = len(tiny_tokenizer(300)(TEXT)["input_ids"])
    windows, width = expected_windows(n_tokens, 14, 3), 1 + 14  # the boundary token leads every window (BOS auto)
    cost = [m.value for m in at.markdown if m.value.startswith("Cost before running")]
    assert cost == [f"Cost before running: {windows:,} windows × {width} tokens (a lead token + prefix 8 + suffix 6) = "
                    f"**{windows * width:,} token-passes** (each window is fed on its own; windows repeated in the "
                    f"text are computed once), within the {MAX_REQUEST_TOKEN_PASSES_CPU:,} one request may cost on this "
                    "server's CPU."]
    assert not calls and not [m for m in at.metric if m.label == "Windows tested"]  # nothing runs before the button
    at.button(key="explore_extraction_run").click().run()
    assert not at.exception, at.exception
    assert len(calls) == 1
    settings = ExtractionSettings(8, 6, 3, 40, 1.0, "auto")
    lm = load_model(str(memorised_dir))
    expected = extract_texts(lm, [TEXT], settings, cache=False)[0]
    summary = expected.summary()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Windows tested"] == f"{summary['windows']:,}" == f"{windows:,}"
    for t, label in zip(THRESHOLDS, ("p_z ≥ 10⁻³", "p_z ≥ 10⁻²", "p_z ≥ 0.1", "p_z ≥ 0.5")):
        assert metrics[label] == f"{summary[f'share_pz_ge_{t:g}']:.1%}"
    assert metrics["Greedy"] == f"{summary['share_greedy']:.1%}"
    counts = next(c.value for c in at.caption if c.value.startswith("Windows: "))
    log10 = expected.windows["log10_pz"].to_numpy()
    for t in THRESHOLDS:  # the counts, from the windows table
        assert f"{int((log10 >= math.log10(t)).sum()):,} of {windows:,}" in counts
    assert f"greedy decoding reproduces {int(expected.windows['greedy'].sum()):,} of {windows:,}" in counts
    assert any("fact about the model" in c.value for c in at.caption)
    stamp = next(m.value for m in at.markdown if m.value.startswith("Extraction of"))
    assert md(str(memorised_dir)) in stamp and f"`{lm.fingerprint[:12]}`" in stamp and f"({n_tokens} tokens" in stamp
    assert "prefix 8 + suffix 6 tokens every 3 tokens, top-40 sampling at temperature 1" in stamp
    body = next(h.proto.body for h in at.get("html") if 'id="explore-extraction"' in h.proto.body)
    assert body.count('class="mia-x-greedy"') == len(expected.passages(greedy=True))
    assert 0 < summary["share_pz_ge_0.5"] < summary["share_pz_ge_0.001"] < 1 and 0 < summary["share_greedy"] < 1
    longest = expected.longest_passage()
    quoted = next(h.proto.body for h in at.get("html") if "mia-x-longest" in h.proto.body)
    assert f"({len(expected.passages())} at p_z ≥ 0.5 in all): {longest.chars:,} characters, " in quoted
    assert f"with p_z ≥ {10 ** longest.min_log10_pz:.2g}." in quoted
    assert f">{html.escape(TEXT[longest.start:longest.end])}</blockquote>" in quoted
    assert len(at.get("plotly_chart")) == 1
    at.number_input(key="explore_x_stride").set_value(4).run()  # the shown result no longer matches the settings
    assert any("the extraction settings changed since: press Run extraction" in w.value for w in at.warning)
    assert len(calls) == 1


def test_a_text_shorter_than_one_window_gets_a_sentence_not_an_error(tiny_model_dir):
    at = open_extraction(tiny_model_dir, "A short text.")
    n_tokens = len(tiny_tokenizer(300)("A short text.")["input_ids"])
    assert not at.exception
    assert any(i.value == f"The text has {n_tokens:,} tokens, fewer than one window (prefix 8 + suffix 6 = 14 tokens): "
               "there is nothing to test. Lower the prefix and suffix, or use a longer text." for i in at.info)
    assert not [b for b in at.button if b.key == "explore_extraction_run"]


def test_an_extraction_over_the_request_bound_says_why_and_cannot_run(tiny_model_dir):
    text = " ".join(random_texts(12, seed=3, min_words=40, max_words=40))
    n_tokens = len(tiny_tokenizer(300)(text)["input_ids"])
    at = open_extraction(tiny_model_dir, text)
    for key, value in {"explore_x_prefix": 200, "explore_x_suffix": 200, "explore_x_stride": 1}.items():
        at.number_input(key=key).set_value(value).run()
    windows = expected_windows(n_tokens, 400, 1)
    assert windows * 401 > MAX_REQUEST_TOKEN_PASSES_CPU
    cost = next(m.value for m in at.markdown if m.value.startswith("Cost before running"))
    assert f"{windows:,} windows × 401 tokens" in cost and f"**{windows * 401:,} token-passes**" in cost
    assert "over the bound, it will not run here" in cost and "others wait in line" in cost and "mia extract" in cost
    assert at.button(key="explore_extraction_run").disabled


def test_a_window_longer_than_the_context_is_refused_before_running(tiny_model_dir):
    at = open_extraction(tiny_model_dir, " ".join(random_texts(20, seed=4, min_words=40, max_words=40)))
    at.number_input(key="explore_x_prefix").set_value(1500).run()
    at.number_input(key="explore_x_suffix").set_value(1000).run()
    assert any("more than this model's context of 2,048" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "explore_extraction_run"]

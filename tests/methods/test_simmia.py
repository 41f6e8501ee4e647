"""SimMIA and SimMIA* in process: the registration, draws equal to the shared sampler's on each prompt alone (so
independent of batching), the score recomputed from the samples, one sampling shared by both methods, the errors,
and the orientation on a model that recites its members."""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from mia_core.blackbox.simmia import EMBEDDERS, label_frequency, sample_words
from mia_core.blackbox.simmia_words import extract_first_word, word_tokenize
from mia_core.methods import METHODS
from mia_core.methods.simmia import draw, prompts_for
from mia_core.methods.simmia.params import SimMiaParams, SimMiaStarParams
from mia_core.model.sampling import Sampling, sample_continuations
from mia_core.scoring import score, score_texts

from tests.blackbox.test_simmia import ToyEmbedder
from tests.support.tiny import random_texts

SHOTS = random_texts(2, seed=99, min_words=6, max_words=8)
FAST = {"n_samples": 3, "n_shots": 2}


def test_registration():
    for name, label in (("simmia", "SimMIA"), ("simmia_star", "SimMIA*")):
        spec = METHODS[name]
        assert spec.label == label and spec.needs == ("stats", "lm", "shots_nonmembers")
        assert spec.access.generation and not spec.access.token_logprob and spec.view.centre == 1.0
        assert spec.paper.link == "https://arxiv.org/abs/2601.11314"
    assert METHODS["simmia_star"].params is SimMiaStarParams and METHODS["simmia"].params is SimMiaParams
    assert SimMiaStarParams().n_samples == 100 and SimMiaStarParams().top_k == 20 and SimMiaParams().seed == 42


@pytest.mark.parametrize("bad", [{"n_samples": 0}, {"n_shots": 1.0}, {"top_k": -1}, {"temperature": 0},
                                 {"mode": "theirs"}, {"seed": True}])
def test_params_are_validated(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SimMiaStarParams(**bad)
    with pytest.raises(ValueError, match="exact_match_number"):
        SimMiaParams(exact_match_number="yes")


def test_draws_are_the_shared_sampler_s_on_each_prompt_alone(llama_lm):
    texts = random_texts(2, seed=5, min_words=4, max_words=6)
    params = SimMiaStarParams(**FAST)
    prefix = "".join(t + "\n\n" for t in SHOTS)
    drawn = draw(llama_lm, [("auto", t) for t in texts], prefix, params)
    sampling = Sampling(3, 42, 1.0, 20, 1.0)
    for text in texts:
        words, prompts = prompts_for(llama_lm, text, prefix, "auto")
        assert len(prompts) == 2 * (len(words) - 1)
        k = len(words) - 1  # the last position, primed: its prompt is P and every word but the last
        key = f"1|{k}|{text}"
        assert prompts[key] == llama_lm.fed_ids(prefix + "".join(words[:k]), "auto")
        alone = sample_continuations(llama_lm, {key: prompts[key]}, {key: 3}, sampling)[key]
        assert drawn["auto", text].prefix_samples[k - 1] == llama_lm.tokenizer.batch_decode(alone,
                                                                                            skip_special_tokens=True)
        assert all(len(row) == 3 for row in alone)


def test_simmia_star_is_its_samples_scored_by_the_spec(llama_lm):
    text = random_texts(1, seed=6, min_words=5, max_words=5)[0]
    stats = llama_lm.token_stats([text])[0]
    result = score("simmia_star", stats, lm=llama_lm, shots_nonmembers=SHOTS, **FAST)
    positions = result.details["positions"]
    words = word_tokenize(text)
    assert [p["label"] for p in positions] == [extract_first_word(w) for w in words[1:]]
    assert all(p["n"] == p["n_prefix"] == 3 for p in positions)
    ratios = []
    for p in positions:
        f, _ = label_frequency(p["label"], dict(p["samples"]))
        f_p, _ = label_frequency(p["label"], dict(p["prefix_samples"]))
        ratios.append(f_p / f)
    assert result.value == pytest.approx(-np.mean(ratios), rel=1e-15)
    assert result.details["variant"] == "SimMIA*" and result.details["embedding"] is None
    assert result.token_scores.shape == (stats.n_scored,) and result.selected.any()
    again = score("simmia_star", stats, lm=llama_lm, shots_nonmembers=SHOTS, **FAST)
    assert again.value == result.value  # seeded


def test_simmia_with_an_embedder_and_one_sampling_for_both(llama_lm, monkeypatch):
    monkeypatch.setitem(EMBEDDERS, "toy", ToyEmbedder)
    module = importlib.import_module("mia_core.methods.simmia.sampling")
    calls = []
    real = module.sample_next_words
    monkeypatch.setattr(module, "sample_next_words", lambda *a, **k: calls.append(1) or real(*a, **k))
    texts = random_texts(2, seed=7, min_words=4, max_words=6)
    df = score_texts(llama_lm, texts, ["simmia", "simmia_star"], shots_nonmembers=SHOTS, embedding="toy", **FAST)
    assert len(calls) == 1  # one bos policy, one prefix: the two methods share the draws
    for text, value in zip(texts, df["simmia"]):
        stats = llama_lm.token_stats([text])[0]
        soft = score("simmia", stats, lm=llama_lm, shots_nonmembers=SHOTS, embedding="toy", **FAST)
        assert soft.value == value and soft.details["embedding"] == {"name": "toy-sha256-8",
                                                                     "sha256": ToyEmbedder.sha256}
        ratios = [naive_s(p["label"], p["prefix_samples"]) / (naive_s(p["label"], p["samples"]) + 1e-11)
                  for p in soft.details["positions"]]
        assert value == pytest.approx(-sum(ratios) / len(ratios), rel=1e-12)


def naive_s(label: str, counted: list[list]) -> float:
    """S = Σ_w f_w (cos + 1)/2 over the counted sample words, in float64 by hand."""
    toy, total = ToyEmbedder(), sum(c for _, c in counted)
    a = [float(x) for x in toy([label])[0]]
    out = 0.0
    for word, count in counted:
        b = [float(x) for x in toy([word])[0]]
        cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
        out += count / total * (cos + 1) / 2
    return out


def test_errors_say_why(llama_lm):
    one = llama_lm.token_stats(["Castle"])[0]
    with pytest.raises(ValueError, match="1 word"):
        score("simmia_star", one, lm=llama_lm, shots_nonmembers=SHOTS, **FAST)
    text = random_texts(1, seed=8, min_words=6, max_words=6)[0]
    long_shots = random_texts(40, seed=9, min_words=24, max_words=24)
    with pytest.raises(ValueError, match="no room"):
        score("simmia_star", llama_lm.token_stats([text])[0], lm=llama_lm, shots_nonmembers=long_shots,
              n_samples=2, n_shots=40)
    with pytest.raises(ValueError, match="no word embedder 'nothing'"):
        score_texts(llama_lm, [text], ["simmia"], shots_nonmembers=SHOTS, embedding="nothing", **FAST)


@pytest.fixture(scope="module")
def oriented(memorising):
    """SimMIA (toy embedder) and SimMIA* of 4 members and 4 held-out texts of the model that recites its members, from
    one sampling."""
    lm, members, nonmembers = memorising["lm"], memorising["members"][:4], memorising["nonmembers"][:4]
    shots = random_texts(2, seed=31, min_words=10, max_words=12)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(EMBEDDERS, "toy", ToyEmbedder)
        return score_texts(lm, members + nonmembers, ["simmia", "simmia_star"], shots_nonmembers=shots, n_samples=5,
                           n_shots=2, embedding="toy")


@pytest.mark.parametrize("method", ["simmia_star"])
def test_simmia_star_scores_members_higher(oriented, method):
    values = oriented[method].to_numpy()
    assert np.all(np.isfinite(values)) and values[:4].mean() > values[4:].mean()


@pytest.mark.parametrize("method", ["simmia"])
def test_simmia_scores_members_higher(oriented, method):
    values = oriented[method].to_numpy()
    assert np.all(np.isfinite(values)) and values[:4].mean() > values[4:].mean()


def test_sample_words_of_decoded_continuations():
    # decoded 3-token continuations carry their leading space and run past the word: the first word is the sample
    assert sample_words([" castle was", " castle", "\n\nThe"]) == {"castle": 2, "The": 1}

"""SaMIA: word arithmetic and ROUGE-1 recall by hand, the sampler against Hugging Face's warpers and
softmax frequencies, `generate` against a manual greedy loop, seeding, order and batching, orientation."""
from __future__ import annotations

import math
import random
import zlib

import numpy as np
import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from mia_core.methods import METHODS
from mia_core.methods import samia as samia_module
from mia_core.methods.samia import SamiaParams, candidate_words, rouge1_recall, split_text
from mia_core.model.sampling import Sampling, SeededSampler, filter_scores, sample_seeds
from mia_core.scoring import score, score_texts

from tests.support.tiny import random_texts

FAST = {"n_samples": 3, "max_length": 96}


def naive_recall(candidate: list[str], reference: list[str]) -> float:
    """Each reference word consumes one equal word of the candidate, if any is left."""
    if not candidate:
        return 0.0
    pool, hits = list(candidate), 0
    for word in reference:
        if word in pool:
            pool.remove(word)
            hits += 1
    return hits / len(reference)


def test_rouge1_recall_by_hand():
    # reference a b a c, candidate a a a d: min(2, 3) for "a", 0 for b and c → 2/4
    assert rouge1_recall(["a", "a", "a", "d"], ["a", "b", "a", "c"]) == 0.5
    assert rouge1_recall([], ["a", "b"]) == 0.0
    # a longer candidate covers the whole reference: recall 1 (precision would be 2/5)
    assert rouge1_recall(["y", "z", "x", "x", "q"], ["x", "y"]) == 1.0
    assert rouge1_recall(["b", "a"], ["a", "a", "b"]) == pytest.approx(2 / 3, rel=1e-15)


def test_split_text_word_arithmetic_by_hand():
    words = [f"w{i}" for i in range(11)]
    # 9 words, ρ = 0.5: floor(4.5) = 4 prompt words, round(4.5) = 4 (to even) dropped
    assert split_text(" ".join(words[:9]), 0.5) == ("w0 w1 w2 w3", 4, words[4:9])
    # 11 words: floor(5.5) = 5 prompt words, round(5.5) = 6 dropped; w5 is in neither
    assert split_text(" ".join(words), 0.5) == ("w0 w1 w2 w3 w4", 6, words[6:])
    # 7 words: floor(3.5) = 3, round(3.5) = 4
    assert split_text(" ".join(words[:7]), 0.5) == ("w0 w1 w2", 4, words[4:7])
    # 7 words, ρ = 0.3: floor(2.1) = round(2.1) = 2
    assert split_text(" ".join(words[:7]), 0.3) == ("w0 w1", 2, words[2:7])
    # any whitespace separates words
    assert split_text("a  b\nc\td", 0.5) == ("a b", 2, ["c", "d"])


def test_candidate_words_drop_and_truncate():
    assert candidate_words("w0 w1 w2  x y\nz", 3) == ["x", "y", "z"]
    assert candidate_words("w0 w1 w2  x y\nz", 3, 2) == ["x", "y"]
    assert candidate_words("w0 w1", 4) == []


def test_words_and_context_errors(llama_lm):
    stats = llama_lm.token_stats(["Castle."])[0]
    with pytest.raises(ValueError, match="0 prompt"):  # 1 word: floor(0.5) = 0
        score("samia", stats, lm=llama_lm, **FAST)
    two = llama_lm.token_stats(["castle river"])[0]
    with pytest.raises(ValueError, match="0 suffix"):  # floor(1.8) = 1, round(1.8) = 2
        score("samia", two, lm=llama_lm, prefix_fraction=0.9, **FAST)
    long = llama_lm.token_stats([random_texts(1, seed=3, min_words=20, max_words=20)[0]])[0]
    with pytest.raises(ValueError, match="no room"):
        score("samia", long, lm=llama_lm, n_samples=2, max_length=4)


@pytest.mark.parametrize("bad", [{"n_samples": 0}, {"n_samples": 2.0}, {"prefix_fraction": 1.0},
                                 {"prefix_fraction": 0}, {"max_length": 1}, {"temperature": 0.0},
                                 {"top_k": -1}, {"top_p": 0.0}, {"top_p": 1.5}, {"zlib": "yes"}, {"seed": True}])
def test_params_are_validated(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        SamiaParams(**bad)


def test_registration_and_token_output(llama_lm):
    spec = METHODS["samia"]
    assert (spec.needs, spec.access.generation, spec.token_level) == (("stats", "lm"), True, False)
    stats = llama_lm.token_stats([random_texts(1, seed=4)[0]])[0]
    result = score("samia", stats, lm=llama_lm, **FAST)
    np.testing.assert_array_equal(result.token_scores, stats.logprob.astype(np.float64))
    assert not result.selected.any() and result.selected.shape == (stats.n_scored,)
    assert len(result.details["samples"]) == 3


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 50, 1.0), (0.7, 5, 1.0), (1.3, 0, 0.8), (1.0, 12, 0.5)])
def test_filter_matches_hugging_face_warpers(temperature, top_k, top_p):
    scores = torch.randn(6, 40, generator=torch.Generator().manual_seed(1)) * 2
    hf = [TemperatureLogitsWarper(temperature)] + ([TopKLogitsWarper(top_k)] if top_k else []) + \
        ([TopPLogitsWarper(top_p)] if top_p < 1 else [])
    expected = LogitsProcessorList(hf)(None, scores.clone())
    ours = filter_scores(scores.clone(), temperature=temperature, top_k=top_k, top_p=top_p, n_tokens=40)
    assert torch.equal(torch.isinf(ours), torch.isinf(expected))
    torch.testing.assert_close(ours[~torch.isinf(ours)], expected[~torch.isinf(expected)], rtol=1e-6, atol=0)
    tail = filter_scores(scores.clone(), temperature=1.0, top_k=0, top_p=1.0, n_tokens=30)
    assert torch.isinf(tail[:, 30:]).all() and not torch.isinf(tail[:, :30]).any()


def test_gumbel_sampler_draws_from_the_filtered_softmax():
    rows = 4000
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(rows, 1)
    seeds = [s for j in range(rows // 4) for s in sample_seeds(0, f"text {j}", 4)]
    counts = {}
    for top_k, top_p in ((0, 1.0), (2, 1.0), (0, 0.5)):
        sampler = SeededSampler(seeds, Sampling(1, 0, 1.0, top_k, top_p), 3, torch.device("cpu"))
        counts[top_k, top_p] = np.bincount(sampler(None, logits.clone()).argmax(-1).numpy(), minlength=3) / rows
    # 3σ of a frequency near 0.5 over 4000 draws is 0.024
    np.testing.assert_allclose(counts[0, 1.0], [0.5, 0.3, 0.2], atol=0.03)
    np.testing.assert_allclose(counts[2, 1.0], [0.5 / 0.8, 0.3 / 0.8, 0.0], atol=0.03)
    assert counts[0, 0.5].tolist() == [1.0, 0.0, 0.0]  # top-p 0.5: the 0.5 token alone reaches the mass


@pytest.mark.parametrize("model,bos", [("llama_lm", "auto"), ("membership", "auto"), ("membership", "none")])
def test_generate_matches_a_manual_greedy_loop(request, model, bos):
    """top_k = 1 leaves one candidate per step: the output is the argmax continuation over the tokenizer's ids
    (llama_lm has 320 logits for 300 tokens; the trained model continues a member, so recall is not 0)."""
    lm = request.getfixturevalue("llama_lm") if model == "llama_lm" else request.getfixturevalue("membership")["lm"]
    text = request.getfixturevalue("membership")["members"][9] if model == "membership" else \
        random_texts(1, seed=11, min_words=14, max_words=14)[0]
    stats = lm.token_stats([text], bos=bos)[0]
    tok, cap = lm.tokenizer, 90
    words = text.split()
    n_prompt, n_drop = len(words) // 2, round(len(words) / 2)
    ids = ([tok.convert_tokens_to_ids("<|endoftext|>")] if bos == "auto" else []) + \
        tok(" ".join(words[:n_prompt]))["input_ids"]
    with torch.no_grad():
        while len(ids) < cap:
            nxt = int(torch.argmax(lm.model(torch.tensor([ids])).logits[0, -1, :len(tok)]))
            ids.append(nxt)
            if nxt == tok.eos_token_id:
                break
    candidate = tok.decode(ids, skip_special_tokens=True).split()[n_drop:]
    expected = naive_recall(candidate, words[n_drop:])
    result = score("samia", stats, lm=lm, n_samples=2, max_length=cap, top_k=1)
    assert [s["candidate"] for s in result.details["samples"]] == [" ".join(candidate)] * 2
    assert result.value == pytest.approx(expected, rel=1e-12)
    assert model == "llama_lm" or expected > 0


def test_zlib_and_truncation_recomputed_from_the_samples(membership):
    lm, text = membership["lm"], membership["members"][0]
    stats = lm.token_stats([text])[0]
    reference = text.split()[round(len(text.split()) / 2):]
    plain = score("samia", stats, lm=lm, **FAST)
    candidates = [s["candidate"].split() for s in plain.details["samples"]]
    assert any(len(c) > len(reference) for c in candidates)
    recalls = [naive_recall(c, reference) for c in candidates]
    assert max(recalls) > 0 and [s["recall"] for s in plain.details["samples"]] == pytest.approx(recalls, rel=1e-12)
    assert plain.value == pytest.approx(np.mean(recalls), rel=1e-12)
    zipped = score("samia", stats, lm=lm, zlib=True, **FAST)
    sizes = [len(zlib.compress(" ".join(c).encode("utf-8"))) for c in candidates]
    assert zipped.value == pytest.approx(np.mean([r * b for r, b in zip(recalls, sizes)]), rel=1e-12)
    cut = score("samia", stats, lm=lm, truncate_candidate=True, **FAST)
    truncated = [naive_recall(c[:len(reference)], reference) for c in candidates]
    assert cut.value == pytest.approx(np.mean(truncated), rel=1e-12) and cut.value <= plain.value
    # by hand: "a b c" against a b d e recalls 2/4; the zlib variant weighs it by the candidate's compressed size
    assert rouge1_recall(["a", "b", "c"], list("abde")) == 0.5
    assert len(zlib.compress(b"a b c")) == 13  # 2-byte header + 7-byte deflate block + 4-byte Adler-32


def test_seeded_reproducible_and_global_rng_untouched(llama_lm):
    stats = llama_lm.token_stats([random_texts(1, seed=13)[0]])[0]
    state = torch.get_rng_state()
    first = score("samia", stats, lm=llama_lm, **FAST).details["samples"]
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(123)  # the global RNG does not enter the draws
    assert score("samia", stats, lm=llama_lm, **FAST).details["samples"] == first
    other = score("samia", stats, lm=llama_lm, seed=1, **FAST).details["samples"]
    assert [s["candidate"] for s in other] != [s["candidate"] for s in first]


def test_order_and_batching_do_not_change_scores(membership):
    lm = membership["lm"]
    texts = membership["members"][:5] + membership["nonmembers"][:5]
    values = score_texts(lm, texts, ["samia"], **FAST)["samia"].to_numpy()
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    shuffled = score_texts(lm, [texts[i] for i in order], ["samia"], **FAST)["samia"].to_numpy()
    np.testing.assert_array_equal(shuffled, values[order])
    alone = [score("samia", s, lm=lm, **FAST).value for s in lm.token_stats(texts)]
    np.testing.assert_array_equal(alone, values)  # one text per `generate` call: the same draws
    assert len(set(values.tolist())) > 1 and all(math.isfinite(v) for v in values)


def test_memorised_suffixes_score_higher(membership):
    lm = membership["lm"]
    # top_k = 5 keeps the weakly memorised tiny model's continuations close to what it learned
    df = score_texts(lm, membership["members"] + membership["nonmembers"], ["samia"], top_k=5, **FAST)
    values = df["samia"].to_numpy()
    assert values[:40].mean() > values[40:].mean()

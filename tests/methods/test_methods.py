"""Every method against an independent naive computation, hand-checked cases, and the registry."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from mia_core import METHODS, FrequencyTable, TokenStats, build_frequency_table, get_method, score, score_texts
from mia_core.methods.dc_pdd import first_occurrences

from tests.support.oracle import naive_min_k, naive_stats
from tests.support.tiny import random_texts

TEXTS = random_texts(5, seed=21, min_words=3, max_words=30)


def rel_close(a, b, tol=1e-5):
    assert abs(a - b) <= tol * max(1.0, abs(b)), (a, b)


def oracle_for(lm, text):
    ids = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + lm.tokenizer(text)["input_ids"]
    return ids, naive_stats(lm.model, ids)


def make_stats(logprob, token_ids=None, mu=None, sigma=None, text="x"):
    n = len(logprob)
    zeros = np.zeros(n)
    return TokenStats(
        text=text, token_ids=np.asarray(token_ids if token_ids is not None else np.arange(n)), tokens=["t"] * n,
        offsets=np.zeros((n, 2), int), logprob=np.asarray(logprob, float), mu=np.asarray(mu if mu is not None else zeros),
        sigma=np.asarray(sigma if sigma is not None else zeros + 1), top1_id=np.zeros(n, int), top1_logprob=zeros,
        entropy=zeros, rank=np.ones(n, int),
    )


@pytest.mark.parametrize("k", [0.05, 0.2, 0.5, 1.0])
def test_single_pass_methods_match_naive_computation(llama_lm, k):
    for stats in llama_lm.token_stats(TEXTS):
        ids, o = oracle_for(llama_lm, stats.text)
        lp = o["logprob"]
        rel_close(score("loss", stats).value, lp.mean())
        rel_close(score("zlib", stats).value, lp.mean() / len(zlib.compress(stats.text.encode())))
        rel_close(score("min_k", stats, k=k).value, naive_min_k(lp, k))
        zs = [(lp[i] - o["mu"][i]) / o["sigma"][i] for i in range(len(lp))]
        rel_close(score("min_k_pp", stats, k=k).value, naive_min_k(zs, k))


def test_k_rounding_by_hand():
    stats = make_stats([-1.0, -5.0, -2.0, -4.0, -3.0])
    assert score("min_k", stats, k=0.2).value == -5.0  # int(5·0.2) = 1 token
    assert score("min_k", stats, k=0.5).value == -4.5  # int(2.5) = 2: −5, −4
    assert score("min_k", stats, k=0.1).value == -5.0  # int(0.5) = 0 → at least 1 (reference: NaN)
    assert score("min_k", stats, k=1.0).value == -3.0
    selected = score("min_k", stats, k=0.5).selected
    assert selected.tolist() == [False, True, False, True, False]
    ties = make_stats([-2.0, -2.0, -1.0])
    assert score("min_k", ties, k=0.34).selected.tolist() == [True, False, False]  # stable: first of the ties
    with pytest.raises(ValueError, match="k must be in"):
        score("min_k", stats, k=0.0)


def test_min_k_pp_by_hand_and_sigma_floor():
    stats = make_stats([-1.0, -3.0], mu=[-2.0, -2.0], sigma=[0.5, 0.0])
    s = score("min_k_pp", stats, k=1.0)
    assert s.token_scores.tolist() == [2.0, -1.0 / 1e-12]
    assert np.isfinite(s.value)


def test_first_occurrence_and_dc_pdd_by_hand():
    assert first_occurrences(np.array([5, 7, 5, 9, 7])).tolist() == [True, True, False, True, False]
    table = FrequencyTable(np.array([6, 2, 0, 0]), "hand", "hand-made", 1)  # N = 8, |V| = 4 → f = [7, 3, 1, 1] / 12
    stats = make_stats(np.log([0.5, 0.1, 0.2, 0.9]), token_ids=[0, 1, 0, 2])
    stats = TokenStats(**{**stats.__dict__, "vocab_width": 4})
    alpha = [-0.5 * np.log(7 / 12), -0.1 * np.log(3 / 12), -0.2 * np.log(7 / 12), -0.9 * np.log(1 / 12)]
    got = score("dc_pdd", stats, freq=table, a=10.0)
    rel_close(got.value, (alpha[0] + alpha[1] + alpha[3]) / 3)
    assert got.selected.tolist() == [True, True, False, True]
    capped = score("dc_pdd", stats, freq=table, a=0.2)
    rel_close(capped.value, (min(alpha[0], 0.2) + min(alpha[1], 0.2) + 0.2) / 3)


def test_dc_pdd_matches_naive_with_a_built_table(llama_lm):
    corpus = random_texts(50, seed=99)
    table = build_frequency_table(llama_lm.tokenizer, corpus, vocab_size=llama_lm.vocab_width)
    counts = np.zeros(llama_lm.vocab_width)
    for text in corpus:
        for i in llama_lm.tokenizer(text, add_special_tokens=False)["input_ids"]:
            counts[i] += 1
    f = (counts + 1) / (counts.sum() + llama_lm.vocab_width)
    for stats in llama_lm.token_stats(TEXTS):
        ids, o = oracle_for(llama_lm, stats.text)
        seen, alphas = set(), []
        for t, lp in zip(ids[1:], o["logprob"]):
            if t not in seen:
                seen.add(t)
                alphas.append(min(-np.exp(lp) * np.log(f[t]), 0.01))
        rel_close(score("dc_pdd", stats, freq=table).value, float(np.mean(alphas)))


def test_lowercase_and_ref_match_naive(llama_lm, gpt2_lm):
    text = "Silver Castle And The North Harbour."
    stats = llama_lm.token_stats([text])[0]
    _, orig = oracle_for(llama_lm, text)
    _, lower = oracle_for(llama_lm, text.lower())
    rel_close(score("lowercase", stats, lm=llama_lm).value, lower["logprob"].mean() / orig["logprob"].mean())
    _, ref = oracle_for(gpt2_lm, text)  # the reference model's own tokenizer
    assert len(ref["logprob"]) != len(orig["logprob"])
    rel_close(score("ref", stats, ref_model=gpt2_lm).value, orig["logprob"].mean() - ref["logprob"].mean())


def test_score_texts_table_equals_per_text_scores(llama_lm, gpt2_lm, tmp_path):
    table = build_frequency_table(llama_lm.tokenizer, random_texts(20, seed=1), vocab_size=llama_lm.vocab_width)
    path = tmp_path / "freq.npz"
    table.save(path)
    unsupervised = [m for m in METHODS if "classifier" not in METHODS[m].needs
                    and "ref_same_token_stats" not in METHODS[m].needs  # those need a reference with our tokenizer
                    and m != "ngram_coverage"  # refuses texts whose suffix is shorter than a run (its own tests)
                    and m not in ("simmia", "simmia_star")]  # P + text outgrow the tiny context (test_simmia.py)
    helpers = {"shots_nonmembers": random_texts(3, seed=2), "shots_members": random_texts(3, seed=3),
               "reference": random_texts(8, seed=4)}
    df = score_texts(llama_lm, TEXTS, unsupervised, k=0.3, ref_model=gpt2_lm, freq=path, a=0.05, n_samples=2,
                     max_length=64, **helpers)
    assert list(df.columns) == unsupervised and len(df) == len(TEXTS)
    for i, stats in enumerate(llama_lm.token_stats(TEXTS)):
        rel_close(df["recall"][i], score("recall", stats, lm=llama_lm, shots_nonmembers=helpers["shots_nonmembers"]).value)
        rel_close(df["camia"][i], score("camia", stats, lm=llama_lm, reference=helpers["reference"]).value)
        rel_close(df["min_k_pp"][i], score("min_k_pp", stats, k=0.3).value)
        rel_close(df["dc_pdd"][i], score("dc_pdd", stats, freq=table, a=0.05).value)
        rel_close(df["ref"][i], score("ref", stats, ref_model=gpt2_lm).value)
        rel_close(df["lowercase"][i], score("lowercase", stats, lm=llama_lm).value)


def test_frequency_table_of_another_tokenizer_is_refused(llama_lm, gpt2_lm):
    table = build_frequency_table(gpt2_lm.tokenizer, ["a b c"], vocab_size=llama_lm.vocab_width)
    with pytest.raises(ValueError, match="tokenizer"):
        score_texts(llama_lm, TEXTS[:1], ["dc_pdd"], freq=table)


def test_bad_names_and_parameters_are_clear(llama_lm):
    with pytest.raises(KeyError, match="available: camia, .*min_k_pp"):
        get_method("minkpp")
    with pytest.raises(TypeError, match="not used"):
        score_texts(llama_lm, TEXTS[:1], ["loss"], a=0.1)
    with pytest.raises(TypeError, match="needs ref_stats= or ref_model="):
        score_texts(llama_lm, TEXTS[:1], ["ref"])
    with pytest.raises(TypeError, match="takes parameters"):
        score("loss", llama_lm.token_stats(TEXTS[:1])[0], k=0.2)


@pytest.mark.parametrize("name", sorted(m for m in METHODS if "classifier" not in METHODS[m].needs
                                        and m not in ("em_mia", "simmia", "simmia_star")))
def test_every_method_scores_members_higher(name, membership, request):
    """Orientation: on a model that memorised the members, every method ranks them higher.

    Supervised methods (a fitted classifier) are checked the same way in their own test module. N-gram coverage reads
    only sampled text, so it runs on the `memorising` model, which recites its members (the `membership` model copies
    no run of 4 words: every score would be 0). EM-MIA is left out: its premise (member prefixes are worse ReCaLL
    prefixes) does not hold on this toy, whose members were each trained alone; tests/methods/test_em_mia.py checks
    its orientation on members trained packed, as pretraining is. SimMIA and SimMIA* sample 2(L−1)·N next words per
    text: tests/methods/test_simmia.py checks them on four members and four held-out texts of the `memorising` model.
    """
    if name == "ngram_coverage":
        membership = request.getfixturevalue("memorising")
    lm, members, nonmembers = membership["lm"], membership["members"], membership["nonmembers"]
    needs = METHODS[name].needs
    extra = {"ref_model": membership["ref_lm"]} if "ref_stats" in needs else {}
    if "ref_same_token_stats" in needs:  # the checkpoint it was trained from, as both papers' reference
        extra["ref_model"] = membership["base_lm"]
    if name == "dc_pdd":
        extra["freq"] = build_frequency_table(lm.tokenizer, random_texts(200, seed=5), vocab_size=lm.vocab_width)
    if name == "surp":  # the tiny model is far less certain than a real LM: few tokens fall under 2 nats
        extra["e_max"] = 4.0
    if name == "samia":  # fewer, shorter samples keep the suite fast; the orientation shows all the same
        extra.update(n_samples=4, max_length=96)
    if name == "ngram_coverage":  # its defaults but fewer samples (L = 4, ρ = 0.5, T = 1, top-p 0.95)
        extra["n_samples"] = 3
    if "shots_nonmembers" in needs:
        extra["shots_nonmembers"] = membership["helper_nonmembers"][:10]
    if "shots_members" in needs:
        extra["shots_members"] = membership["helper_members"]
    if "reference" in needs:
        extra["reference"] = membership["helper_nonmembers"][10:]
    df = score_texts(lm, members + nonmembers, [name], **extra)
    values = df[name].to_numpy()
    assert values[:len(members)].mean() > values[len(members):].mean()
    assert np.all(np.isfinite(values))

"""Infilling Score: the fast KV-cache path against the per-position reference and a float64 oracle."""
from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import (
    GPTNeoXConfig,
    GPTNeoXForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from mia_core import METHODS, load_model, metrics, score, score_texts
from mia_core.methods.infilling.engine import (
    combine,
    fast_supported,
    fed_ids,
    infilling_token_scores,
    plan_branches,
    primed_fast,
    primed_reference,
)
from mia_core.api import lowest_k

from tests.support.cli_runner import run_cli
from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts, tiny_gpt2, tiny_llama, tiny_tokenizer, train_causal_lm

#: Texts of 7, 21 and 39 tokens (m defaults to 1 up to 32 tokens, then 5).
TEXTS = [random_texts(1, seed=s, min_words=w, max_words=w)[0] for s, w in ((1, 1), (2, 6), (3, 10))]


@pytest.fixture(autouse=True)
def one_thread(request):
    """Tiny models run fastest on one thread (OpenMP sync per tiny op dominates on a busy CPU); restored after."""
    if request.node.get_closest_marker("integration"):
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_neox(vocab: int):
    torch.manual_seed(2)
    config = GPTNeoXConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, max_position_embeddings=256, rotary_pct=0.5)
    return GPTNeoXForCausalLM(config).eval()


def tiny_qwen2(vocab: int):
    torch.manual_seed(3)
    config = Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    return Qwen2ForCausalLM(config).eval()


ARCHS = {
    "llama": lambda tok: tiny_llama(len(tok), seed=0, logits_width=320),  # logits wider than the vocabulary
    "gpt2": lambda tok: tiny_gpt2(len(tok), seed=1),
    "gpt_neox": lambda tok: tiny_neox(len(tok)),
    "qwen2": lambda tok: tiny_qwen2(len(tok)),
}


@pytest.fixture(scope="module")
def trained():
    """Per architecture, a tiny model trained for a few steps (peaked predictions, like a real LM)."""
    tok = tiny_tokenizer(300)
    corpus = random_texts(12, seed=11, min_words=6, max_words=16)
    return tok, {name: train_causal_lm(make(tok), tok, corpus, steps=12, lr=1e-2) for name, make in ARCHS.items()}


@pytest.mark.parametrize("arch, attention", [("llama", "sdpa"), ("llama", "eager"), ("gpt2", "sdpa"),
                                             ("gpt2", "eager"), ("gpt_neox", "sdpa"), ("qwen2", "sdpa")])
def test_fast_matches_reference_on_every_token(arch, attention, trained, make_lm):
    tok, models = trained
    model = models[arch]
    model.config._attn_implementation = attention
    lm = make_lm(model, tok)
    worst = 0.0
    try:
        for bos, m_values in (("auto", (1, 5)), ("none", (3,))):
            for stats in lm.token_stats(TEXTS, bos=bos):
                full = fed_ids(lm, stats)
                for m in m_values:
                    branches = plan_branches(stats, full, m)
                    reference = primed_reference(lm, full, branches)
                    for chunk in (None, 7) if m > 1 else (None,):  # one chunk, and chunks that split the branches
                        fast = primed_fast(lm, full, branches, chunk_tokens=chunk)
                        for norm in ("position", "anchor"):
                            a, b = combine(stats, branches, fast, norm), combine(stats, branches, reference, norm)
                            worst = max(worst, float(np.max(np.abs(a - b))))
    finally:
        model.config._attn_implementation = "sdpa"
    assert worst <= 1e-4, worst


def test_untrained_wide_logits_model_agrees_through_the_api(llama_lm):
    """Near-uniform predictions (small σ amplify rounding) and top-1 ids beyond the tokenizer."""
    for stats in llama_lm.token_stats(TEXTS):
        fast, facts = infilling_token_scores(llama_lm, stats, m=4, implementation="fast")
        ref, _ = infilling_token_scores(llama_lm, stats, m=4, implementation="reference")
        assert facts["implementation"] == "fast" and np.max(np.abs(fast - ref)) <= 1e-4


def naive_infilling(model, ids: list[int], m: int) -> dict[str, np.ndarray]:
    """docs/methods.md's r_i ("infilling") written out in float64 from full-logit passes (tests/support/oracle.py), one per position."""
    o = naive_stats(model, ids)
    n = len(ids) - 1
    r = {"position": np.zeros(n), "anchor": np.zeros(n)}
    for i in range(n):
        if o["top1_id"][i] == ids[i + 1]:
            continue  # exactly 0
        sub = list(ids)
        sub[i + 1] = int(o["top1_id"][i])
        p = naive_stats(model, sub)
        for norm in r:
            r[norm][i] = (o["logprob"][i] - o["top1_logprob"][i]) / o["sigma"][i]
        for j in range(i + 1, min(i + m, n - 1) + 1):
            r["position"][i] += ((o["logprob"][j] - o["mu"][j]) / o["sigma"][j]
                                 - (p["logprob"][j] - p["mu"][j]) / p["sigma"][j])
            r["anchor"][i] += (o["logprob"][j] - p["logprob"][j]) / o["sigma"][i]
    return r


def test_both_paths_match_a_float64_oracle(trained, make_lm):
    tok, models = trained
    lm = make_lm(models["llama"], tok)
    boundary = tok.convert_tokens_to_ids("<|endoftext|>")
    for text in TEXTS[:2]:
        stats = lm.token_stats([text])[0]
        expected = naive_infilling(lm.model, [boundary] + tok(text)["input_ids"], 3)
        for norm, implementation in (("position", "fast"), ("anchor", "fast"), ("position", "reference")):
            got, _ = infilling_token_scores(lm, stats, m=3, normalization=norm, implementation=implementation)
            np.testing.assert_allclose(got, expected[norm], atol=1e-4, rtol=0)


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_float64_models_make_both_paths_exact(arch, trained, make_lm):
    """In float64 (logits and statistics too) the two paths and the oracle agree far below float32 noise."""
    tok, models = trained
    model = copy.deepcopy(models[arch]).double()
    lm = make_lm(model, tok)
    boundary = tok.convert_tokens_to_ids("<|endoftext|>")
    for text in TEXTS[:3]:
        stats = lm.token_stats([text])[0]
        assert stats.logprob.dtype == np.float64 and stats.sigma.dtype == np.float64
        expected = naive_infilling(model, [boundary] + tok(text)["input_ids"], 5)
        for norm in ("position", "anchor"):
            fast, _ = infilling_token_scores(lm, stats, m=5, normalization=norm, implementation="fast")
            ref, _ = infilling_token_scores(lm, stats, m=5, normalization=norm, implementation="reference")
            np.testing.assert_allclose(fast, ref, atol=1e-9, rtol=0)
            np.testing.assert_allclose(fast, expected[norm], atol=1e-9, rtol=0)


def test_top1_tokens_are_exactly_zero_and_get_no_branch(membership):
    lm = membership["lm"]
    stats = lm.token_stats(membership["members"][:1])[0]
    n = stats.n_scored
    is_top1 = stats.token_ids == stats.top1_id
    assert 0 < is_top1.sum() < n  # the trained model predicts some tokens of a member, not all
    branches = plan_branches(stats, fed_ids(lm, stats), 5)
    assert [b.index for b in branches] == [i for i in range(n - 1) if not is_top1[i]]
    # the last token serves as a future token: the branch at n-2 has one target
    assert [len(b.targets) for b in branches] == [min(5, n - 1 - b.index) for b in branches]
    r, facts = infilling_token_scores(lm, stats, m=5)
    assert np.all(r[is_top1] == 0.0) and np.all(r[~is_top1] != 0.0)
    assert facts["substituted positions"] == len(branches)
    last = n - 1  # no future token: r is the gap to the top-1 alone
    expected_last = 0.0 if is_top1[last] else (stats.logprob[last] - stats.top1_logprob[last]) / stats.sigma[last]
    assert r[last] == pytest.approx(expected_last, abs=1e-6)


def test_registered_method_default_m_and_selection(llama_lm):
    spec = METHODS["infilling"]
    assert spec.needs == ("stats", "lm") and spec.access.full_distribution and "m" in spec.cost
    assert spec.param_names == ("k", "m", "normalization")
    short, long = llama_lm.token_stats(TEXTS[1:])
    assert short.n_scored <= 32 < long.n_scored
    for stats, m in ((short, 1), (long, 5)):
        got = score("infilling", stats, lm=llama_lm, k=0.3)
        r, _ = infilling_token_scores(llama_lm, stats, m=m)
        expected = lowest_k(r, 0.3)
        assert got.value == expected.value and np.array_equal(got.selected, expected.selected)
        assert got.details["m"] == m and got.details["normalization"] == "position"
    anchor = score("infilling", long, lm=llama_lm, m=2, normalization="anchor")
    assert anchor.value == lowest_k(infilling_token_scores(llama_lm, long, m=2, normalization="anchor")[0], 0.2).value


def test_bad_parameters_and_long_texts_are_clear(llama_lm, gpt2_lm, make_lm, tok):
    stats = llama_lm.token_stats(TEXTS[2:3])[0]
    for params, needle in (({"m": 0}, "m must be a positive integer"), ({"normalization": "mean"}, "normalization"),
                           ({"k": 0.0}, "k must be in")):
        with pytest.raises(ValueError, match=needle):
            score("infilling", stats, lm=llama_lm, **params)
    with pytest.raises(TypeError, match="needs lm="):
        score("infilling", stats)
    short = make_lm(tiny_llama(len(tok), seed=0, max_positions=16), tok)
    with pytest.raises(ValueError, match="sliding windows"):
        score("infilling", short.token_stats([TEXTS[2]])[0], lm=short)
    truncated = short.token_stats([TEXTS[2]], long_text="truncate")[0]
    assert truncated.long_text == "truncated" and truncated.n_scored == 15
    fast, _ = infilling_token_scores(short, truncated, implementation="fast")
    ref, _ = infilling_token_scores(short, truncated, implementation="reference")
    assert np.max(np.abs(fast - ref)) <= 1e-4
    with pytest.raises(ValueError, match="do not match"):  # statistics of another model's tokenizer
        score("infilling", stats, lm=gpt2_lm)


def test_unvalidated_architectures_use_the_reference(tok, make_lm):
    torch.manual_seed(4)
    config = MistralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    lm = make_lm(MistralForCausalLM(config).eval(), tok)  # sliding-window attention: a different cache
    assert not fast_supported(lm.model) and all(fast_supported(make(tok)) for make in ARCHS.values())
    stats = lm.token_stats(TEXTS[1:2])[0]
    r, facts = infilling_token_scores(lm, stats)
    assert facts["implementation"] == "reference" and r.shape == (stats.n_scored,)
    with pytest.raises(ValueError, match="not validated"):
        infilling_token_scores(lm, stats, implementation="fast")


def test_members_score_higher_on_a_trained_model(membership):
    lm, members, nonmembers = membership["lm"], membership["members"][:20], membership["nonmembers"][:20]
    df = score_texts(lm, members + nonmembers, ["infilling"])
    labels = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    assert metrics.auroc(labels, df["infilling"]) >= 0.8


def test_cli_takes_infilling_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    tok = tiny_tokenizer(300)
    tiny_gpt2(len(tok), seed=1).save_pretrained(folder)
    tok.save_pretrained(folder)
    texts = random_texts(3, seed=9)
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts))
    code, _, err = run_cli("score", "--model", folder, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "s.csv",
                           "--methods", "infilling", "--param", "m=2", "--param", "normalization=anchor")
    assert code == 0, err
    got = pd.read_csv(tmp_path / "s.csv")["infilling"].to_numpy()
    expected = score_texts(load_model(str(folder)), texts, ["infilling"], m=2, normalization="anchor")["infilling"]
    np.testing.assert_allclose(got, expected.to_numpy(), rtol=1e-6)
    code, _, err = run_cli("score", "--model", folder, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "t.csv",
                           "--methods", "infilling", "--param", "m=0")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error:") and "m must be a positive integer" in err

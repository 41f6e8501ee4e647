"""ReCaLL and Con-ReCall against a naive float64 recomputation, the context fitting by hand, the reference tokenisation."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from mia_core import get_method, score, score_texts
from mia_core.evaluation import evaluate_methods, reproduce_command
import mia_core.methods.recall as recall_module
from mia_core.methods.helper_texts import HelperSplit, HelperTexts
from mia_core.methods.recall.prefix import condition, fit_prefix, prefix_lengths

from tests.support.tiny import random_texts

TEXTS = random_texts(5, seed=31, min_words=3, max_words=30)
SHOTS = random_texts(3, seed=32, min_words=6, max_words=12)
MEMBER_SHOTS = random_texts(3, seed=33, min_words=6, max_words=12)


def boundary(lm) -> list[int]:
    return [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")]


def ids_of(lm, text: str) -> list[int]:
    return list(lm.tokenizer(text)["input_ids"])


@torch.inference_mode()
def naive_logprobs(model, seq: list[int], first: int) -> np.ndarray:
    """log p(seq[t] | seq[:t]) for t = first…len−1 from the full float64 logits."""
    logits = model.double()(torch.tensor([seq])).logits[0].double()
    model.float()
    logp = torch.log_softmax(logits, -1).numpy()
    return np.array([logp[t - 1, seq[t]] for t in range(first, len(seq))])


def naive_recall(lm, shots, text, bos="auto") -> tuple[float, np.ndarray]:
    """LL(x|P)/LL(x) and per-token differences with F(P) + F(x), written out from the spec."""
    head = boundary(lm) if bos == "auto" else []
    prefix = head + ids_of(lm, "".join(shots))
    fed = head + ids_of(lm, text)
    cond = naive_logprobs(lm.model, prefix + fed, len(prefix) + 1)
    plain = naive_logprobs(lm.model, fed, 1)
    return cond.mean() / min(plain.mean(), -1e-12), cond - plain


@pytest.mark.parametrize("bos", ["auto", "none"])
def test_recall_matches_naive_computation(llama_lm, bos):
    stats = llama_lm.token_stats(TEXTS, bos=bos)
    df = score_texts(llama_lm, TEXTS, ["recall"], bos=bos, shots_nonmembers=SHOTS)
    for st, value in zip(stats, df["recall"]):
        expected, per_token = naive_recall(llama_lm, SHOTS, st.text, bos)
        got = score("recall", st, lm=llama_lm, shots_nonmembers=SHOTS)
        assert value == pytest.approx(expected, rel=1e-5)
        assert got.value == pytest.approx(expected, rel=1e-5)
        np.testing.assert_allclose(got.token_scores, per_token, rtol=1e-4, atol=1e-5)
        assert got.selected.all() and got.details["shots_kept"] == 3 and not got.details["truncated"]


def test_con_recall_matches_naive_computation(llama_lm):
    df = score_texts(llama_lm, TEXTS, ["con_recall"], shots_nonmembers=SHOTS, shots_members=MEMBER_SHOTS, gamma=0.7)
    for text, value in zip(TEXTS, df["con_recall"]):
        fed = boundary(llama_lm) + ids_of(llama_lm, text)
        lls = []
        for shots in (SHOTS, MEMBER_SHOTS):
            prefix = boundary(llama_lm) + ids_of(llama_lm, "".join(shots))
            lls.append(naive_logprobs(llama_lm.model, prefix + fed, len(prefix) + 1).mean())
        plain = naive_logprobs(llama_lm.model, fed, 1).mean()
        assert value == pytest.approx((lls[0] - 0.7 * lls[1]) / plain, rel=1e-5)


def test_recall_and_con_recall_share_the_non_member_prefix_pass(llama_lm, monkeypatch):
    """Together in one call, each prefix's conditional passes run once (the non-member one is not repeated for
    Con-ReCall), and the scores equal each method scored alone."""

    alone = {m: score_texts(llama_lm, TEXTS, [m], shots_nonmembers=SHOTS, shots_members=MEMBER_SHOTS)[m]
             for m in ("recall", "con_recall")}
    calls = []
    real = recall_module.prefix.condition
    monkeypatch.setattr(recall_module.prefix, "condition", lambda lm, shots, stats, **kw: calls.append(tuple(shots)) or
                        real(lm, shots, stats, **kw))
    both = score_texts(llama_lm, TEXTS, ["recall", "con_recall"], shots_nonmembers=SHOTS, shots_members=MEMBER_SHOTS)
    assert sorted(calls) == sorted([tuple(SHOTS), tuple(MEMBER_SHOTS)])  # each prefix once
    for m in ("recall", "con_recall"):
        np.testing.assert_array_equal(both[m].to_numpy(), alone[m].to_numpy())
    calls.clear()
    score_texts(llama_lm, TEXTS, ["recall", "con_recall"], shots_nonmembers=SHOTS, shots_members=MEMBER_SHOTS)
    assert len(calls) == 2  # nothing kept from the last call: the shared work lives for one call


def test_cached_prefix_equals_reencoding_it_per_text(llama_lm):
    stats = llama_lm.token_stats(TEXTS + random_texts(6, seed=34, min_words=1, max_words=60))
    cached = condition(llama_lm, SHOTS, stats)
    again = condition(llama_lm, SHOTS, stats, reuse_prefix=False)
    for a, b in zip(cached, again):
        assert a.fitted == b.fitted
        np.testing.assert_allclose(a.logprob, b.logprob, atol=1e-5)


def test_shots_are_dropped_whole_from_the_front_until_the_text_fits(tok, make_lm, llama_lm):
    lm = make_lm(llama_lm.model, tok, max_length=64)
    shots = random_texts(4, seed=35, min_words=5, max_words=8)
    lengths = [len(boundary(lm) + ids_of(lm, "".join(shots[-j:]))) for j in range(1, 5)]
    assert prefix_lengths(lm, shots, "auto") == lengths
    text = random_texts(1, seed=36, min_words=6, max_words=6)[0]
    n = lm.token_stats([text])[0].n_scored
    kept = max(j for j in range(1, 5) if lengths[j - 1] + 1 + n <= 64)
    assert kept < 4  # the test needs a case where some shots are dropped
    got = score("recall", lm.token_stats([text])[0], lm=lm, shots_nonmembers=shots)
    expected, _ = naive_recall(lm, shots[-kept:], text)
    assert got.details["shots_kept"] == kept and got.value == pytest.approx(expected, rel=1e-5)


def test_a_prefix_longer_than_the_context_scores_the_first_tokens_of_both_passes(tok, make_lm, llama_lm):
    lm = make_lm(llama_lm.model, tok, max_length=48)
    long_shot = [random_texts(1, seed=37, min_words=8, max_words=8)[0]]
    n_prefix = prefix_lengths(lm, long_shot, "auto")[0]
    text = random_texts(1, seed=38, min_words=12, max_words=12)[0]
    st = lm.token_stats([text])[0]
    m = 48 - 1 - n_prefix
    assert 1 <= m < st.n_scored
    assert fit_prefix([n_prefix], st.n_scored, 48).n_scored == m
    got = score("recall", st, lm=lm, shots_nonmembers=long_shot)
    prefix = boundary(lm) + ids_of(lm, long_shot[0])
    fed = (boundary(lm) + ids_of(lm, text))[: 1 + m]
    cond = naive_logprobs(lm.model, prefix + fed, len(prefix) + 1)
    plain = st.logprob[:m].astype(np.float64)
    assert got.details["truncated"] and got.details["scored_tokens"] == m
    assert got.value == pytest.approx(cond.mean() / plain.mean(), rel=1e-5)
    assert got.selected.sum() == m and not got.selected[m:].any()
    too_long = [random_texts(1, seed=39, min_words=30, max_words=30)[0]]
    with pytest.raises(ValueError, match="no text token can be scored"):
        score("recall", st, lm=lm, shots_nonmembers=too_long)


def test_reference_mode_reproduces_the_authors_tokenisation(llama_lm):
    for text in TEXTS[:3]:
        prefix, ids = ids_of(llama_lm, "".join(SHOTS)), ids_of(llama_lm, text)
        cond = naive_logprobs(llama_lm.model, prefix + ids, len(prefix))  # every token of enc(x)
        plain = naive_logprobs(llama_lm.model, ids, 1)  # enc(x)[1:], as get_ll
        got = score("recall", llama_lm.token_stats([text])[0], lm=llama_lm, shots_nonmembers=SHOTS, mode="reference")
        assert got.value == pytest.approx(cond.mean() / plain.mean(), rel=1e-5)
        assert got.details["ll_conditional"] == pytest.approx(cond.mean(), rel=1e-5)


def test_helper_texts_are_never_scored(llama_lm):
    with pytest.raises(ValueError, match="never be scored"):
        score_texts(llama_lm, TEXTS, ["recall"], shots_nonmembers=[TEXTS[2]] + SHOTS)
    with pytest.raises(ValueError, match="never be scored"):
        score_texts(llama_lm, TEXTS, ["camia"], reference=TEXTS[:2] + SHOTS)
    with pytest.raises(TypeError, match="needs shots_nonmembers"):
        score_texts(llama_lm, TEXTS, ["recall"])


def test_evaluation_splits_helpers_off_and_scores_only_the_rest(llama_lm):
    texts = random_texts(40, seed=40)
    data = pd.DataFrame({"id": [f"t{i}" for i in range(40)], "text": texts, "label": [i % 2 for i in range(40)]})
    run = evaluate_methods(llama_lm, data, ["loss", "recall", "con_recall"], n_boot=100,
                           helper_split=HelperSplit(n_shots=4, seed=3))
    helpers = run.report["helpers"]
    non, mem = helpers["shots_nonmembers"]["ids"], helpers["shots_members"]["ids"]
    assert len(non) == len(mem) == 4 and not set(non) & set(mem)
    assert all(int(i[1:]) % 2 == 0 for i in non) and all(int(i[1:]) % 2 == 1 for i in mem)
    assert set(run.scores["id"]) == set(data["id"]) - set(non) - set(mem)
    assert run.report["n_members"] + run.report["n_nonmembers"] == 32
    by_id = dict(zip(data["id"], texts))
    again = score_texts(llama_lm, [by_id[i] for i in run.scores["id"]], ["recall"],
                        shots_nonmembers=HelperTexts(tuple(by_id[i] for i in non), "shots_nonmembers"))
    np.testing.assert_allclose(run.scores["recall"], again["recall"], rtol=1e-6)
    command = reproduce_command(run.report["run"])
    assert "--n-shots 4 --reference-fraction 0.3 --helper-seed 3" in command


@pytest.mark.parametrize("bad", [{"n_shots": 0}, {"n_shots": 2.5}, {"mode": "authors"}])
def test_recall_parameters_are_checked(bad):
    with pytest.raises(ValueError):
        get_method("recall").make_params(**bad)


def test_con_recall_gamma_is_checked():
    with pytest.raises(ValueError, match="gamma"):
        get_method("con_recall").make_params(gamma=-1)

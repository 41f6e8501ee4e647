"""grad_norm against plain autograd on float64 copies of tiny models, by hand, and the model left as it was."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from mia_core import score, score_texts
from mia_core.methods.grad_norm import GradNormParams, combine, engine, grad_norm, prepare, text_gradients

from tests.support.tiny import random_texts, tiny_llama

TEXTS = random_texts(3, seed=31, min_words=3, max_words=20)
NORMS = {"inf": lambda g: np.max(np.abs(g)), 1: lambda g: np.sum(np.abs(g)), 2: lambda g: np.sqrt(np.sum(g * g))}


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and on a busy 2-core machine two threads spin: 1 s becomes 2 min."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def rel_close(a, b, tol):
    assert abs(a - b) <= tol * max(1e-12, abs(b)), (a, b)


def fed_ids(lm, text, bos="auto"):
    """Boundary token first under bos="auto", as the shared pass feeds a text."""
    boundary = [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] if bos == "auto" else []
    return boundary + lm.tokenizer(text)["input_ids"]


def naive_gradients(model, ids, *, wrt="params", context_start=None):
    """Plain autograd on a float64 copy: (loss, per-tensor flat gradients) or (loss, (T, d) input gradient).

    Token t is predicted from ids[context_start(t) : t] when a context start is given (sliding windows:
    one forward per distinct start), else from one forward over all ids. Tensors are deduplicated by
    hand, by identity.
    """
    m = copy.deepcopy(model).double().eval()
    ids_t = torch.tensor(ids)
    emb = m.get_input_embeddings()(ids_t).detach().requires_grad_(True)  # (T, d)

    def logits_of(a: int, b: int) -> torch.Tensor:  # (b − a, vocab): row i predicts token a + i + 1
        return m(**({"inputs_embeds": emb[None, a:b]} if wrt == "inputs" else {"input_ids": ids_t[None, a:b]})).logits[0]

    if context_start is None:
        terms = torch.log_softmax(logits_of(0, len(ids))[:-1], -1)[torch.arange(len(ids) - 1), ids_t[1:]]
    else:
        starts = {t: context_start(t) for t in range(1, len(ids))}
        ends = {a: max(t for t, c in starts.items() if c == a) for a in set(starts.values())}
        logp = {a: torch.log_softmax(logits_of(a, b), -1) for a, b in ends.items()}  # one forward per window
        terms = torch.stack([logp[a][t - 1 - a, ids[t]] for t, a in starts.items()])
    loss = -terms.mean()
    loss.backward()
    if wrt == "inputs":
        return float(loss.detach()), emb.grad.numpy()
    seen, flats = set(), []
    for _, p in m.named_parameters(remove_duplicate=False):
        if id(p) not in seen and p.grad is not None:
            seen.add(id(p))
            flats.append(p.grad.numpy().ravel())
    return float(loss.detach()), flats


def expected(flats, p, aggregate):
    if aggregate == "mean":
        return np.mean([NORMS[p](g) for g in flats])
    return NORMS[p](np.concatenate(flats))


@pytest.fixture
def lm64(request, make_lm):
    """The fixture model named by the parameter, as a float64 copy (our path and the oracle both in float64)."""
    lm = request.getfixturevalue(request.param)
    return make_lm(copy.deepcopy(lm.model).double(), lm.tokenizer)


@pytest.mark.parametrize("lm64", ["llama_lm", "gpt2_lm"], indirect=True)
@pytest.mark.parametrize("bos", ["auto", "none"])
def test_params_match_plain_autograd(lm64, bos):
    for stats in lm64.token_stats(TEXTS, bos=bos):
        loss, flats = naive_gradients(lm64.model, fed_ids(lm64, stats.text, bos))
        for p in ("inf", 1, 2):
            for aggregate in ("mean", "global"):
                got = score("grad_norm", stats, lm=lm64, p=p, aggregate=aggregate)
                rel_close(got.value, -expected(flats, p, aggregate), 1e-7)
        rel_close(got.details["loss"], loss, 1e-7)
        rel_close(got.details["loss"], -float(np.mean(stats.logprob)), 1e-7)  # the shared pass's token set
        assert got.details["pieces"] == len(flats)
        np.testing.assert_array_equal(got.token_scores, stats.logprob)


def test_float32_model_matches_float64_oracle(llama_lm):
    for stats in llama_lm.token_stats(TEXTS):
        _, flats = naive_gradients(llama_lm.model, fed_ids(llama_lm, stats.text))
        for p in ("inf", 1, 2):
            rel_close(score("grad_norm", stats, lm=llama_lm, p=p).value, -expected(flats, p, "mean"), 1e-5)


@pytest.mark.parametrize("lm64", ["gpt2_lm"], indirect=True)
def test_tied_embeddings_count_once(lm64):
    model = lm64.model
    assert model.lm_head.weight is model.transformer.wte.weight  # tiny GPT-2 ties them
    n_named = len(list(model.named_parameters(remove_duplicate=False)))
    stats = lm64.token_stats(TEXTS[:1])[0]
    _, flats = naive_gradients(model, fed_ids(lm64, stats.text))
    assert len(flats) == n_named - 1
    got = score("grad_norm", stats, lm=lm64, p=2)
    assert got.details["pieces"] == len(flats)
    twice = np.mean([NORMS[2](g) for g in flats] + [NORMS[2](flats[0])])  # wte counted again
    rel_close(got.value, -expected(flats, 2, "mean"), 1e-7)
    assert abs(got.value + twice) > 1e-6


@pytest.mark.parametrize("lm64", ["llama_lm", "gpt2_lm"], indirect=True)
def test_inputs_match_plain_autograd(lm64):
    for stats in lm64.token_stats(TEXTS):
        ids = fed_ids(lm64, stats.text)
        _, grad = naive_gradients(lm64.model, ids, wrt="inputs")  # (T, d)
        for p in ("inf", 1, 2):
            for aggregate in ("mean", "global"):  # one tensor: the aggregate changes nothing
                got = score("grad_norm", stats, lm=lm64, p=p, aggregate=aggregate, wrt="inputs")
                rel_close(got.value, -NORMS[p](grad.ravel()), 1e-7)
            rows = np.array([NORMS[p](grad[t]) for t in range(1, len(ids))])  # scored token t = fed position t
            np.testing.assert_allclose(got.token_scores, -rows, rtol=1e-7)
        assert np.abs(grad[-1]).max() == 0 and got.token_scores[-1] == 0  # the last token's embedding predicts nothing


def test_long_texts_use_the_shared_pass_windows(tok, make_lm):
    context = 16
    lm = make_lm(tiny_llama(len(tok), seed=4, max_positions=context).double(), tok, max_length=context)
    text = random_texts(1, seed=5, min_words=24)[0]
    ids = fed_ids(lm, text)
    assert len(ids) > 2 * context

    def window_start(t):  # windows end at 16, 24, 32, … (stride 8): a token's window is the first reaching it
        return 0 if t < context else t - (t - context) % (context // 2) - context // 2

    stats = lm.token_stats([text])[0]
    assert stats.long_text == "sliding"
    for wrt in ("params", "inputs"):
        loss, grads = naive_gradients(lm.model, ids, wrt=wrt, context_start=window_start)
        got = score("grad_norm", stats, lm=lm, p=1, aggregate="global", wrt=wrt)
        rel_close(got.value, -NORMS[1](np.concatenate(grads) if wrt == "params" else grads), 1e-7)
        rel_close(got.details["loss"], loss, 1e-7)
        assert got.details["long_text"] == "sliding"
    cut = lm.token_stats([text], long_text="truncate")[0]
    _, flats = naive_gradients(lm.model, ids[:context])
    got = score("grad_norm", cut, lm=lm, p=2)
    rel_close(got.value, -expected(flats, 2, "mean"), 1e-7)
    assert got.details["long_text"] == "truncated"


@pytest.mark.parametrize("name", ["llama_lm", "gpt2_lm"])
def test_batched_equals_per_text(name, request, make_lm):
    lm = request.getfixturevalue(name)
    short = make_lm(lm.model, lm.tokenizer, max_length=24)  # the long text goes through windows
    texts = random_texts(4, seed=8, min_words=2, max_words=30) + random_texts(1, seed=9, min_words=30, max_words=40)
    plans = engine.plans_for(short, texts, "auto", "sliding")
    assert [len(p.windows) > 1 for p in plans].count(True) >= 1
    loop = engine.loop_param_norms(short, plans)
    batched = engine.batched_param_norms(short, plans, batch_tokens=96, gradient_bytes=1 << 20)  # chunks of 3–5
    alone = [engine.input_norms(short, [p])[0] for p in plans]
    together = engine.input_norms(short, plans, batch_tokens=96)
    for a, b in [*zip(loop, batched), *zip(alone, together)]:
        np.testing.assert_allclose(b.norms, a.norms, rtol=1e-5, atol=0)
        rel_close(b.loss, a.loss, 1e-5)
    assert engine.vmap_suits(short)  # tiny models take the batched path by default


def test_prepare_hands_each_text_the_norms_its_scorer_reads(llama_lm):
    """One batched `prepare` over all texts; the scorer reduces the norms it is handed for any p and aggregate
    without another pass, and equals scoring each text on its own."""
    calls = []
    llama_lm.model.get_input_embeddings().register_forward_hook(lambda *a: calls.append(1))
    stats = llama_lm.token_stats(TEXTS)
    contexts = prepare(stats, GradNormParams(), lm=llama_lm)
    n = len(calls)
    assert n > 0 and len(contexts) == len(stats)
    values = [grad_norm(s, GradNormParams(p=p), lm=llama_lm, context=c).value
              for s, c in zip(stats, contexts) for p in ("inf", 1, 2)]
    assert len(calls) == n and len(set(values)) == len(values)
    df = score_texts(llama_lm, TEXTS, ["grad_norm"], p=2, aggregate="global")  # statistics from the disk cache
    global_2 = [score("grad_norm", s, lm=llama_lm, p=2, aggregate="global").value for s in stats]
    np.testing.assert_allclose(df["grad_norm"].to_numpy(), global_2, rtol=1e-5)


def test_model_state_is_restored(llama_lm):
    model = llama_lm.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    frozen = model.model.embed_tokens.weight
    frozen.requires_grad_(False)
    sentinel = torch.ones_like(model.lm_head.weight)
    model.lm_head.weight.grad = sentinel
    model.train()
    flags = [p.requires_grad for p in model.parameters()]
    stats = llama_lm.token_stats(TEXTS)
    for batched in (True, False):
        text_gradients(llama_lm, stats, "params", batched=batched)
    score("grad_norm", stats[0], lm=llama_lm, wrt="inputs")
    assert model.training and [p.requires_grad for p in model.parameters()] == flags
    assert model.lm_head.weight.grad is sentinel and all(
        p.grad is None for p in model.parameters() if p is not model.lm_head.weight)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_non_finite_gradient_is_an_error(tok, make_lm):
    model = tiny_llama(len(tok), seed=2)
    with torch.no_grad():
        model.model.norm.weight[0] = float("nan")
    lm = make_lm(model, tok)
    with pytest.raises(ValueError, match="non-finite gradient"):
        score("grad_norm", lm.token_stats(TEXTS[:1])[0], lm=lm)


def test_combine_by_hand():
    norms = np.array([1.0, 2.0, 2.0])
    assert combine(norms, "inf", "mean") == pytest.approx(5 / 3)
    assert combine(norms, "inf", "global") == 2.0
    assert combine(norms, 1, "global") == 5.0
    assert combine(norms, 2, "global") == 3.0


def test_parameters_are_checked():
    assert GradNormParams().p == "inf"
    for p in (float("inf"), np.inf, "inf", "Inf", "∞"):
        assert GradNormParams(p=p).p == "inf"
    assert GradNormParams(p=1.0).p == 1 and GradNormParams(p="2").p == 2 and GradNormParams(p=np.int64(2)).p == 2
    for bad in (3, 0, True, -float("inf"), "max", None):
        with pytest.raises(ValueError, match="p must be inf, 1 or 2"):
            GradNormParams(p=bad)
    with pytest.raises(ValueError, match="aggregate must be one of"):
        GradNormParams(aggregate="sum")
    with pytest.raises(ValueError, match="wrt must be one of"):
        GradNormParams(wrt="weights")


def test_empty_text_is_refused(llama_lm):
    with pytest.raises(ValueError, match="no token to score"):
        score("grad_norm", llama_lm.token_stats([""])[0], lm=llama_lm)

"""Token statistics against a naive float64 oracle: values, batching, windows, BOS policies, cache."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from tokenizers import processors
from transformers import PreTrainedTokenizerFast

from mia_core.model import forward
from mia_core.model.boundary import boundary_token_id

from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts, tiny_llama

FIELDS = ("logprob", "mu", "sigma", "top1_logprob", "entropy")


def full_ids(lm, text):
    return [lm.tokenizer.convert_tokens_to_ids("<|endoftext|>")] + lm.tokenizer(text)["input_ids"]


def assert_matches(stats, expected, rtol=1e-5, atol=1e-5):
    for name in FIELDS:
        np.testing.assert_allclose(getattr(stats, name), expected[name], rtol=rtol, atol=atol, err_msg=name)
    np.testing.assert_array_equal(stats.top1_id, expected["top1_id"])
    np.testing.assert_array_equal(stats.rank, expected["rank"])


@pytest.mark.parametrize("fixture", ["llama_lm", "gpt2_lm"])
def test_stats_match_naive_oracle(fixture, request):
    lm = request.getfixturevalue(fixture)
    texts = random_texts(6, seed=11, min_words=1, max_words=30)
    for stats in lm.token_stats(texts, cache=False):
        ids = full_ids(lm, stats.text)
        assert stats.n_scored == len(ids) - 1 == stats.n_text_tokens
        assert stats.vocab_width == lm.vocab_width
        np.testing.assert_array_equal(stats.token_ids, ids[1:])
        assert_matches(stats, naive_stats(lm.model, ids))


def test_logits_wider_than_tokenizer_are_all_in_the_softmax(llama_lm):
    assert llama_lm.vocab_width == 320 > len(llama_lm.tokenizer)
    stats = llama_lm.token_stats(["Silver river."], cache=False)[0]
    assert_matches(stats, naive_stats(llama_lm.model, full_ids(llama_lm, "Silver river.")))


def test_offsets_and_display_strings_cover_the_text(llama_lm):
    text = "The <b>castle</b>\n  by the  river."
    stats = llama_lm.token_stats([text], cache=False)[0]
    assert "".join(text[a:b] for a, b in stats.offsets) == text
    assert stats.tokens == [text[a:b] for a, b in stats.offsets]


def test_batching_and_fallback_head_are_invariant(llama_lm, monkeypatch):
    texts = random_texts(9, seed=3, min_words=2, max_words=40)
    batched = llama_lm.token_stats(texts, cache=False, batch_tokens=256)
    single = [llama_lm.token_stats([t], cache=False, batch_tokens=1)[0] for t in texts]
    monkeypatch.setattr(forward, "plain_head", lambda model: None)  # full-logits path
    full_logits = llama_lm.token_stats(texts, cache=False, batch_tokens=10_000)
    for a, b, c in zip(batched, single, full_logits):
        for name in FIELDS:
            assert np.max(np.abs(getattr(a, name) - getattr(b, name)), initial=0) <= 1e-4
            assert np.max(np.abs(getattr(a, name) - getattr(c, name)), initial=0) <= 1e-4


def test_pack_batches_respects_the_token_budget():
    segs = [forward.Segment(i, [0] * n, 1) for i, n in enumerate([5, 30, 12, 12, 7, 30])]
    batches = forward.pack_batches(segs, 40)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for batch in batches:
        width = max(len(segs[i].ids) for i in batch)
        assert len(batch) == 1 or len(batch) * width <= 40
        assert [len(segs[i].ids) for i in batch] == sorted((len(segs[i].ids) for i in batch), reverse=True)


def test_bos_none_leaves_first_token_unscored(llama_lm):
    text = "Ancient harbour built north."
    stats = llama_lm.token_stats([text], bos="none", cache=False)[0]
    ids = llama_lm.tokenizer(text)["input_ids"]
    assert stats.boundary_token is None and stats.bos_policy == "none"
    assert stats.n_scored == len(ids) - 1
    np.testing.assert_array_equal(stats.token_ids, ids[1:])
    assert_matches(stats, naive_stats(llama_lm.model, ids))
    with pytest.raises(ValueError, match="bos"):
        llama_lm.token_stats([text], bos="bos")


def _tokenizer_with_specials(tok, bos, eos, adds_bos=False):
    backend = tok.backend_tokenizer.__class__.from_str(tok.backend_tokenizer.to_str())
    backend.add_special_tokens(["<|im_start|>", "<|im_end|>", "<s>"])
    if adds_bos:
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, backend.token_to_id(bos))])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token=eos)


def test_boundary_rule_never_uses_chat_tokens(tok):
    chat = _tokenizer_with_specials(tok, "<|im_start|>", "<|im_end|>")  # SmolLM2-Instruct's setup
    assert boundary_token_id(chat) == chat.convert_tokens_to_ids("<|endoftext|>")
    plain = _tokenizer_with_specials(tok, "<s>", "<|im_end|>")
    assert boundary_token_id(plain) == plain.convert_tokens_to_ids("<s>")
    adds = _tokenizer_with_specials(tok, "<s>", "<|im_end|>", adds_bos=True)  # LLaMA-style
    assert boundary_token_id(adds) is None


def test_tokenizer_that_adds_bos_scores_every_text_token(tok, make_lm):
    adds = _tokenizer_with_specials(tok, "<s>", "<|im_end|>", adds_bos=True)
    lm = make_lm(tiny_llama(len(adds), seed=2), adds)
    text = "Quietly elected senate."
    ids = adds(text)["input_ids"]
    stats = lm.token_stats([text], cache=False)[0]
    assert ids[0] == adds.bos_token_id and stats.boundary_token is None
    assert stats.n_scored == len(ids) - 1 == len(tok(text)["input_ids"])
    assert_matches(stats, naive_stats(lm.model, ids))


def test_sliding_windows_give_each_token_its_window_context(tok, make_lm):
    context = 16
    lm = make_lm(tiny_llama(len(tok), seed=4, max_positions=context), tok, max_length=context)
    text = " ".join(random_texts(3, seed=5))
    ids = full_ids(lm, text)
    assert len(ids) > 3 * context
    stats = lm.token_stats([text], cache=False)[0]
    assert stats.long_text == "sliding" and stats.n_scored == len(ids) - 1

    def window_start(t):  # windows end at 16, 24, 32, … (stride 8): a token's window is the first reaching it
        return 0 if t < context else t - (t - context) % (context // 2) - context // 2

    assert_matches(stats, naive_stats(lm.model, ids, context_start=window_start), atol=2e-5)

    truncated = lm.token_stats([text], long_text="truncate", cache=False)[0]
    assert truncated.long_text == "truncated" and truncated.n_scored == context - 1
    assert_matches(truncated, naive_stats(lm.model, ids[:context]))


def test_split_windows_cover_every_token_once():
    for n in (1, 2, 16, 17, 40, 101):
        windows = forward.split_windows(n, 16, 8)
        scored = [i for a, b, s in windows for i in range(a + s, b)]
        assert scored == list(range(1, n))
        assert all(b - a <= 16 and (s >= 8 or a == 0) for a, b, s in windows)


def test_cache_hit_does_not_run_the_model(llama_lm):
    calls = []
    llama_lm.model.get_input_embeddings().register_forward_hook(lambda *a: calls.append(1))
    texts = random_texts(4, seed=9)
    first = llama_lm.token_stats(texts)
    n_first = len(calls)
    assert n_first > 0
    second = llama_lm.token_stats(texts)
    assert len(calls) == n_first  # answered from disk
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.logprob, b.logprob)
        assert a.tokens == b.tokens and a.boundary_token == b.boundary_token
    llama_lm.token_stats(texts, bos="none")  # another policy is another key
    assert len(calls) > n_first


def test_empty_text_has_no_scored_tokens_and_methods_refuse_it(llama_lm):
    from mia_core import score

    stats = llama_lm.token_stats(["", "x"], cache=False)
    assert stats[0].n_scored == 0 and stats[1].n_scored == 1
    with pytest.raises(ValueError, match="empty"):
        score("min_k", stats[0])
    assert np.isfinite(score("min_k_pp", stats[1]).value)


def test_progress_reports_tokens(llama_lm):
    seen = []
    llama_lm.token_stats(random_texts(5, seed=2), cache=False, batch_tokens=64, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1][0] == seen[-1][1] and all(a[0] < b[0] for a, b in zip(seen, seen[1:]))


def test_stats_are_float32_reductions_of_bf16_models(tok, make_lm):
    model = tiny_llama(len(tok), seed=6).to(torch.bfloat16)
    lm = make_lm(model, tok)
    stats = lm.token_stats(["Painted lantern."], cache=False)[0]
    assert stats.logprob.dtype == np.float32 and np.all(np.isfinite(stats.sigma))


def test_appended_eos_is_not_scored(tok, make_lm):
    backend = tok.backend_tokenizer.__class__.from_str(tok.backend_tokenizer.to_str())
    eot = backend.token_to_id("<|endoftext|>")
    backend.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", eot)])
    appends = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    lm = make_lm(tiny_llama(len(appends), seed=2), appends)
    text = "Silver harbour."
    stats = lm.token_stats([text], cache=False)[0]
    assert stats.token_ids.tolist() == tok(text)["input_ids"]  # the trailing <|endoftext|> is not text
    assert stats.offsets[-1, 1] == len(text)


def test_cache_key_follows_the_boundary_token(tok, make_lm, tmp_path):
    from mia_core.model.stats_cache import StatsCache

    model = tiny_llama(len(tok), seed=0, logits_width=310)  # room for the added special tokens
    cache = StatsCache(tmp_path / "shared")
    first = make_lm(model, tok)
    first.stats_cache = cache
    other_tok = _tokenizer_with_specials(tok, "<s>", "<|im_end|>")  # same vocabulary ids, another boundary
    second = make_lm(model, other_tok)
    second.stats_cache, second.fingerprint = cache, first.fingerprint  # even under one fingerprint
    a = first.token_stats(["River castle."])[0]
    b = second.token_stats(["River castle."])[0]
    assert (a.boundary_token, b.boundary_token) == ("<|endoftext|>", "<s>")
    assert not np.allclose(a.logprob[0], b.logprob[0])


def test_texts_with_nothing_to_score_do_not_break_the_batch(llama_lm):
    stats = llama_lm.token_stats(["River castle north.", "", "x"], bos="none", cache=False)
    assert [s.n_scored for s in stats] == [len(llama_lm.tokenizer("River castle north.")["input_ids"]) - 1, 0, 0]
    assert stats[0].first_token_scored is False
    with pytest.raises(ValueError, match="text 1: no token to score"):
        from mia_core import score_texts

        score_texts(llama_lm, ["River castle north.", ""], ["loss"], bos="none")


def test_truncated_zlib_uses_the_scored_prefix(tok, make_lm):
    import zlib

    from mia_core import score

    lm = make_lm(tiny_llama(len(tok), seed=4, max_positions=16), tok, max_length=16)
    text = " ".join(random_texts(3, seed=5))
    stats = lm.token_stats([text], long_text="truncate", cache=False)[0]
    prefix = text[: stats.offsets[-1, 1]]
    assert stats.scored_text == prefix and len(prefix) < len(text)
    expected = stats.logprob.astype(float).mean() / len(zlib.compress(prefix.encode()))
    assert score("zlib", stats).value == pytest.approx(expected, rel=1e-6)


def test_half_precision_models_get_a_float32_head(tok, make_lm):
    model = tiny_llama(len(tok), seed=6)
    text = "Painted lantern by the river."
    ids = full_ids(make_lm(model, tok), text)
    half = make_lm(tiny_llama(len(tok), seed=6).to(torch.bfloat16), tok)
    stats = half.token_stats([text], cache=False)[0]
    with torch.inference_mode():  # oracle: bf16 backbone, float32 head and log_softmax
        hidden = half.model.model(torch.tensor([ids]))[0][0, :-1].float()
        logp = torch.log_softmax(hidden @ half.model.lm_head.weight.float().T, -1)
    expected = logp.gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1).numpy()
    np.testing.assert_allclose(stats.logprob, expected, atol=1e-5)


def test_corrupt_cache_entries_are_misses(llama_lm):
    texts = ["Quartz meadow."]
    first = llama_lm.token_stats(texts)[0]
    for path in llama_lm.stats_cache.root.rglob("*.stats"):
        path.write_bytes(path.read_bytes()[:50])
    again = llama_lm.token_stats(texts)[0]
    np.testing.assert_array_equal(first.logprob, again.logprob)


def test_pad_id_outside_the_model_vocabulary_is_harmless(tok, make_lm):
    padded = PreTrainedTokenizerFast(tokenizer_object=tok.backend_tokenizer, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    padded.add_special_tokens({"pad_token": "[PAD]"})
    assert padded.pad_token_id >= 300
    lm = make_lm(tiny_llama(300, seed=0), padded)
    stats = lm.token_stats(["River.", "A much longer text about the castle."], cache=False)
    assert all(np.isfinite(s.logprob).all() for s in stats)


def test_minus_infinity_logits_stay_finite():
    from mia_core.model.reduce import reduce_logits

    out = reduce_logits(torch.tensor([[1.0, 2.0, float("-inf")]]), torch.tensor([2]))
    assert all(torch.isfinite(v).all() for v in out.values())
    assert out["mu"].item() == pytest.approx(float(np.sum(np.exp([-1.3133, -0.3133]) * [-1.3133, -0.3133])), abs=1e-3)


def test_max_length_below_two_is_refused(tok, make_lm):
    with pytest.raises(ValueError, match="max_length"):
        make_lm(tiny_llama(len(tok)), tok, max_length=1)

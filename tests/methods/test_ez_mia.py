"""EZ-MIA against a naive float64 re-computation of METHODS-FIELD.md §12, by hand, on its edge cases, and through the
same-token reference pass (the reference model run on the target's own ids, cached like the shared pass)."""
from __future__ import annotations

import numpy as np
import pytest

from mia_core import TokenStats, get_method, score, score_texts

from tests.support.oracle import naive_stats
from tests.support.tiny import random_texts, tiny_llama

TEXTS = random_texts(4, seed=31, min_words=4, max_words=20)
REFUSAL = "compares token by token: the reference model must share the target's tokenizer"


def stats_of(logprob, token_ids, top1_id, text="x") -> TokenStats:
    """Hand-made statistics: the fields EZ-MIA and WBC read (log p, ids, top-1 id), the rest neutral."""
    n = len(logprob)
    zeros = np.zeros(n)
    return TokenStats(text=text, token_ids=np.asarray(token_ids, np.int64), tokens=["t"] * n,
                      offsets=np.zeros((n, 2), int), logprob=np.asarray(logprob, np.float32), mu=zeros,
                      sigma=zeros + 1, top1_id=np.asarray(top1_id, np.int64), top1_logprob=zeros, entropy=zeros,
                      rank=np.ones(n, int))


def naive_ez_mia(target, reference, ids, top1, *, min_error_tokens=2, drop_first=True) -> float:
    """The spec's formula one token at a time in Python floats: drop the first token, error set, P / (N + 1e-12);
    too few errors → every kept token; P = N = 0 → 1.0."""
    kept = list(range(1 if drop_first else 0, len(ids)))
    errors = [t for t in kept if top1[t] != ids[t]]
    used = errors if len(errors) >= min_error_tokens else kept
    positive = negative = 0.0
    for t in used:
        d = float(target[t]) - float(reference[t])
        if d > 0:
            positive += d
        elif d < 0:
            negative += -d
    return 1.0 if positive == 0 and negative == 0 else positive / (negative + 1e-12)


def ez(target_lp, ref_lp, ids, top1, **params):
    return score("ez_mia", stats_of(target_lp, ids, top1), ref_same_token_stats=stats_of(ref_lp, ids, top1), **params)


def test_a_hand_computed_case():
    # tokens 1, 2, 4 are errors (top-1 ≠ id); token 0 is dropped, token 3 was guessed right
    # d = [·, −2 − (−1), −0.25 − (−1.5), ·, −1 − (−1)] = [·, −1, 1.25, ·, 0] → P = 1.25, N = 1
    got = ez([-1.0, -2.0, -0.25, -3.0, -1.0], [-1.5, -1.0, -1.5, -2.0, -1.0], [5, 6, 7, 8, 9], [0, 1, 2, 8, 3])
    assert got.value == pytest.approx(1.25 / (1.0 + 1e-12), rel=1e-15)
    assert got.selected.tolist() == [False, True, True, False, True]
    np.testing.assert_allclose(got.token_scores, [0.5, -1.0, 1.25, -1.0, 0.0])
    assert got.details["error_tokens"] == 3 and not got.details["fallback_all_tokens"]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("params", [{}, {"drop_first": False}, {"min_error_tokens": 5}])
def test_matches_the_naive_formula_on_random_inputs(seed, params):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 14))
    ids, target, reference = rng.integers(0, 6, n), -rng.exponential(2, n), -rng.exponential(2, n)
    top1 = np.where(rng.random(n) < 0.6, rng.integers(0, 6, n), ids)
    expected = naive_ez_mia(target.astype(np.float32), reference.astype(np.float32), ids, top1, **params)
    assert ez(target, reference, ids, top1, **params).value == pytest.approx(expected, rel=1e-12)


def test_too_few_error_tokens_fall_back_to_every_kept_token():
    # one error (token 2) < 2: the ratio over tokens 1–3: d = [·, 0.5, −0.25, 1.0] → 1.5 / 0.25 (the authors: 0.0)
    got = ez([0.0, -0.5, -1.25, -1.0], [0.0, -1.0, -1.0, -2.0], [1, 2, 3, 4], [1, 2, 0, 4])
    assert got.details["fallback_all_tokens"] and got.details["error_tokens"] == 1
    assert got.value == pytest.approx(1.5 / (0.25 + 1e-12), rel=1e-12)
    assert got.selected.tolist() == [False, True, True, True]


def test_no_negative_shift_ranks_the_text_at_the_top_and_no_shift_gives_one():
    got = ez([0.0, -0.5, -1.0], [0.0, -1.0, -1.5], [1, 2, 3], [0, 0, 0])  # both errors raised: P = 1, N = 0
    assert got.value == pytest.approx(1.0 / 1e-12, rel=1e-12) and got.details["no_negative_shift"]
    same = ez([0.0, -0.5, -1.0], [0.0, -0.5, -1.0], [1, 2, 3], [0, 0, 0])
    assert same.value == 1.0 and same.details["no_negative_shift"]


def test_the_first_token_counts_only_without_the_drop():
    args = ([-0.5, -1.0, -1.0], [-1.5, -1.0, -2.0], [1, 2, 3], [0, 0, 0])  # d = [1, 0, 1], N = 0 either way
    assert ez(*args).value == pytest.approx(1.0 / 1e-12) and ez(*args, drop_first=False).value == pytest.approx(2e12)


def test_bad_inputs_are_errors_not_scores():
    with pytest.raises(ValueError, match="no scored token is left"):
        ez([-1.0], [-2.0], [1], [0])
    with pytest.raises(ValueError, match="not finite"):
        ez([-1.0, np.nan, -1.0], [-1.0, -1.0, -1.0], [1, 2, 3], [0, 0, 0])
    with pytest.raises(ValueError, match="other tokens than the target's"):
        score("ez_mia", stats_of([-1.0, -1.0], [1, 2], [0, 0]), ref_same_token_stats=stats_of([-1.0, -1.0], [1, 3], [0, 0]))
    with pytest.raises(ValueError, match="min_error_tokens must be an integer"):
        get_method("ez_mia").make_params(min_error_tokens=0)


def test_a_reference_with_another_tokenizer_is_refused(llama_lm, gpt2_lm):
    for name in ("ez_mia", "wbc"):
        with pytest.raises(ValueError, match=f"^{name} {REFUSAL}$"):
            score_texts(llama_lm, TEXTS, [name], ref_model=gpt2_lm)


def test_the_reference_runs_on_the_targets_ids_and_is_cached(llama_lm, tok, make_lm):
    """The reference (its own logits width, 300, against the target's 320) scores exactly the target's fed ids, as a
    naive full-logits pass of both models on those ids gives; a second call runs no reference pass."""
    reference = make_lm(tiny_llama(len(tok), seed=4), tok)
    calls = []
    hook = reference.model.base_model.register_forward_hook(lambda *a: calls.append(1))  # the backbone runs each pass
    try:
        got = score_texts(llama_lm, TEXTS, ["ez_mia"], ref_model=reference)["ez_mia"].to_numpy()
        first = len(calls)
        again = score_texts(llama_lm, TEXTS, ["ez_mia"], ref_model=reference)["ez_mia"].to_numpy()
    finally:
        hook.remove()
    assert first > 0 and len(calls) == first and np.array_equal(again, got)
    for value, text in zip(got, TEXTS):
        ids = llama_lm.fed_ids(text)
        target, ref = naive_stats(llama_lm.model, ids), naive_stats(reference.model, ids)
        expected = naive_ez_mia(target["logprob"], ref["logprob"], ids[1:], target["top1_id"])
        assert value == pytest.approx(expected, rel=1e-4)



def test_a_reference_equal_to_the_target_reads_its_own_pass(llama_lm, tok, make_lm):
    """The same weights and tokenizer: the reference pass is the target's cached one, so d ≡ 0 exactly (not the float
    noise of another batching): EZ-MIA 1.0 (P = N = 0), WBC 0.0 (every window a tie, which votes non-member)."""
    twin = make_lm(llama_lm.model, tok)
    assert twin.fingerprint == llama_lm.fingerprint
    llama_lm.token_stats(TEXTS)  # the target's pass, cached
    calls = []
    hook = llama_lm.model.base_model.register_forward_hook(lambda *a: calls.append(1))
    try:
        df = score_texts(llama_lm, TEXTS, ["ez_mia", "wbc"], ref_model=twin)
    finally:
        hook.remove()
    assert not calls  # neither pass ran again: the reference's is the target's cached one
    assert df["ez_mia"].tolist() == [1.0] * len(TEXTS) and df["wbc"].tolist() == [0.0] * len(TEXTS)

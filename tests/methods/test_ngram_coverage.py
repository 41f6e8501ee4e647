"""N-gram coverage: the span search and coverage against a literal port of the authors' loop and a window oracle,
hand-computed cases, the split's word arithmetic, `generate` against a manual greedy loop, order and batching,
edge cases; the orientation runs in test_methods.py.

Sampling tests use the `memorising` model (conftest.py), which recites its 8 members: from a member's prefix its
samples copy long runs of the true suffix, so the scores checked are real coverages, not zeros."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest
import torch
from nltk.tokenize.casual import casual_tokenize
from sacremoses import MosesDetokenizer
from unidecode import unidecode

from mia_core.methods import METHODS
from mia_core.methods.ngram_coverage import NgramCoverageParams, removed_words, split_text
from mia_core.methods.ngram_coverage.matching import coverage, detokenize, find_spans, reproduced, substring_occurs
from mia_core.scoring import score, score_texts

from tests.support.tiny import random_texts

FAST = {"n_samples": 3}
#: Hotter, uncut sampling from the memorising model: members' samples copy part of the suffix, so their mean
#: coverages differ from text to text and from 0 and 1 (at T = 1 each member's samples recite it whole).
PARTIAL = {"n_samples": 4, "temperature": 1.35, "top_p": 1.0, "aggregate": "mean"}


def authors_spans(gen: list[str], ref: list[str], L: int, suffix: str | None = None) -> list[tuple[int, int]]:
    """`find_exact_match` written out: with `suffix`, their test (the Moses-detokenized run is a substring of the
    unidecoded suffix); else a contiguous-sublist test in its place."""
    def occurs(run):
        if suffix is not None:
            return MosesDetokenizer(lang="en").detokenize(run) in unidecode(suffix)
        return any(ref[i:i + len(run)] == run for i in range(len(ref) - len(run) + 1))
    spans, first, second = [], 0, L
    while second <= len(gen):
        if occurs(gen[first:second]):
            new = (first, second)
            if spans and new[0] <= spans[-1][0] and spans[-1][1] <= new[1]:
                spans = spans[:-1] + [new]
            else:
                spans.append(new)
            second += 1
        elif second - first > L:
            first += 1
        else:
            first, second = first + 1, second + 1
    return spans


def authors_coverage(gen, spans, min_gram, ref_length, unique, detokenize=" ".join):
    """`get_ngram_coverage` written out: (gen_length, ref_length, total_length) coverages."""
    flags, seen = [False for _ in gen], set()
    for a, b in spans:
        text = detokenize(gen[a:b])
        if b - a >= min_gram and (not unique or text not in seen):
            flags[a:b] = [True] * (b - a)
        seen.add(text)
    covered = len([f for f in flags if f])
    if covered == 0:
        return 0, 0, 0
    longer = max(len(flags), ref_length)
    return covered / len(flags), covered / longer, 2 * covered / (len(flags) + longer)


def window_oracle(gen, ref, L) -> float:
    """Share of `gen` words lying in some length-L window whose L-gram occurs in `ref` (METHODS-FIELD.md §14, 4)."""
    grams = {tuple(ref[i:i + L]) for i in range(len(ref) - L + 1)}
    inside = [any(tuple(gen[s:s + L]) in grams for s in range(max(0, i - L + 1), min(i, len(gen) - L) + 1))
              for i in range(len(gen))]
    return sum(inside) / len(gen)


def test_coverage_by_hand():
    g = "the cat sat on the mat and the cat sat on the mat".split()
    r = "the cat sat on the mat".split()
    assert find_spans(g, r, 4) == [(0, 6), (7, 13)]  # each grown to the whole six words, then replaced
    kw = {"min_run": 1, "ref_length": len(r), "normalization": "gen_length"}
    assert coverage(g, [(0, 6), (7, 13)], unique=False, **kw) == 12 / 13
    assert coverage(g, [(0, 6), (7, 13)], unique=True, **kw) == 6 / 13  # the second run repeats the first
    short = "x the cat sat on".split()  # 5 words against a suffix of 10: the run "the cat sat on" covers 4
    ref = "the cat sat on the mat and more words here".split()
    spans = find_spans(short, ref, 4)
    assert spans == [(1, 5)]
    got = [coverage(short, spans, min_run=1, ref_length=10, unique=True, normalization=n)
           for n in ("gen_length", "ref_length", "total_length")]
    assert got == [4 / 5, 4 / 10, 8 / 15]
    # runs match as words: "he lazy dog" is no run of "the lazy dog" (the authors' substring test would match it)
    assert find_spans("he lazy dog ran".split(), "the lazy dog ran".split(), 4) == []
    assert reproduced("a b c d e".split(), [["b", "c"], ["e"]]) == [False, True, True, False, True]


@pytest.mark.parametrize("seed", range(40))
def test_span_search_matches_the_authors_loop_and_the_window_oracle(seed):
    rng = random.Random(seed)
    vocab = list("abcd")[:rng.randint(2, 4)]
    ref = [rng.choice(vocab) for _ in range(rng.randint(1, 14))]
    gen = [rng.choice(vocab) for _ in range(rng.randint(1, 18))]
    for L in (1, 2, 3, 4):
        if len(gen) < L:
            continue
        spans = find_spans(gen, ref, L)
        assert spans == authors_spans(gen, ref, L)
        assert coverage(gen, spans, min_run=1, ref_length=len(ref), unique=False,
                        normalization="gen_length") == pytest.approx(window_oracle(gen, ref, L), rel=1e-15)
        for unique in (False, True):
            for n in range(1, 6):
                expected = authors_coverage(gen, spans, n, len(ref), unique)
                got = [coverage(gen, spans, min_run=n, ref_length=len(ref), unique=unique, normalization=k)
                       for k in ("gen_length", "ref_length", "total_length")]
                assert got == pytest.approx(expected, rel=1e-15)


def test_reference_mode_matches_characters_as_the_authors_code():
    gen, suffix = "he lazy dog ran off".split(), "the lazy dog ran."
    ref = casual_tokenize(suffix)
    assert find_spans(gen, ref, 4) == []  # as words, "he" is not "the"
    spans = find_spans(gen, ref, 4, substring_occurs(gen, suffix))
    assert spans == [(0, 4)] == authors_spans(gen, ref, 4, suffix)  # "he lazy dog ran" is inside "the lazy dog ran."
    assert coverage(gen, spans, min_run=1, ref_length=len(ref), unique=True, normalization="gen_length",
                    key=detokenize) == 4 / 5
    assert substring_occurs(["Cafe", "au", "lait"], "Café au lait")(0, 3)  # the suffix is transliterated first


@pytest.mark.parametrize("seed", range(30))
def test_reference_span_search_matches_the_authors_loop(seed):
    """Words that are substrings of others ("ab" in "cab") and punctuation that Moses glues ("," ".")."""
    rng = random.Random(seed)
    vocab = ["ab", "cab", "b", "ba", ",", ".", "a"]
    suffix = " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 16)))
    ref = casual_tokenize(unidecode(suffix))
    gen = [rng.choice(vocab) for _ in range(rng.randint(1, 16))]
    for L in (1, 2, 3, 4):
        if len(gen) < L:
            continue
        spans = find_spans(gen, ref, L, substring_occurs(gen, suffix))
        assert spans == authors_spans(gen, ref, L, suffix)
        md = MosesDetokenizer(lang="en").detokenize
        for unique in (False, True):
            expected = authors_coverage(gen, spans, L, len(ref), unique, detokenize=md)
            got = [coverage(gen, spans, min_run=L, ref_length=len(ref), unique=unique, normalization=k,
                            key=detokenize) for k in ("gen_length", "ref_length", "total_length")]
            assert got == pytest.approx(expected, rel=1e-15)


def test_removed_words_arithmetic_by_hand():
    p = NgramCoverageParams()
    assert removed_words("a b", p) == 1  # max(1, min(1, 1))
    assert removed_words("a b c", p) == 1  # int(1.5)
    assert removed_words(" ".join("abcdefghij"), NgramCoverageParams(suffix_fraction=0.95)) == 9  # min(9, 9)
    assert removed_words(" ".join("abcdefghij"), NgramCoverageParams(suffix_fraction=0.05)) == 1  # max(1, 0)
    assert removed_words(" ".join("abcdefghij"), NgramCoverageParams(words_from_end=3)) == 3
    with pytest.raises(ValueError, match="at least two words"):
        removed_words("castle", p)
    with pytest.raises(ValueError, match="leaves no prefix"):
        removed_words("a b c", NgramCoverageParams(words_from_end=3))


def test_split_at_the_token_boundary(llama_lm):
    tok = llama_lm.tokenizer
    words = random_texts(1, seed=21, min_words=9, max_words=9)[0].split()
    text = " ".join(words)
    prefix, suffix, n_suffix = split_text(tok, text, NgramCoverageParams())
    # 9 words: int(4.5) = 4 removed; a space token that ends where the first removed word starts stays in the prefix
    assert prefix + suffix == text and prefix.split() == words[:5] and suffix.split() == words[5:]
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert n_suffix == len(ids) - len(tok(prefix, add_special_tokens=False)["input_ids"])
    assert tok.decode(ids[len(ids) - n_suffix:]) == suffix


def test_edge_cases_are_clear_errors(llama_lm):
    one = llama_lm.token_stats(["Castle."])[0]
    with pytest.raises(ValueError, match="at least two words"):
        score("ngram_coverage", one, lm=llama_lm, **FAST)
    short = llama_lm.token_stats(["castle river stone tower"])[0]  # 2 suffix words < L = 4
    with pytest.raises(ValueError, match="fewer than ngram=4"):
        score("ngram_coverage", short, lm=llama_lm, **FAST)
    assert score("ngram_coverage", short, lm=llama_lm, ngram=2, **FAST).value >= 0
    long = llama_lm.token_stats([random_texts(1, seed=3, min_words=20, max_words=20)[0]])[0]
    with pytest.raises(ValueError, match="leaves no prefix"):
        score("ngram_coverage", long, lm=llama_lm, words_from_end=20, **FAST)


@pytest.mark.parametrize("bad", [{"n_samples": 0}, {"ngram": 0}, {"suffix_fraction": 1.0}, {"suffix_fraction": 0},
                                 {"words_from_end": -1}, {"max_new_tokens": 1.5}, {"temperature": 0.0},
                                 {"top_p": 0.0}, {"normalization": "words"}, {"aggregate": "sum"},
                                 {"statistic": "ci"}, {"mode": "chars"}, {"unique": "yes"}, {"ci_max": 0}, {"task_prompt": 3},
                                 {"seed": True}])
def test_params_are_validated(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        NgramCoverageParams(**bad)


def greedy_continuation(lm, prefix: str, n_tokens: int) -> str:
    """The model's most likely `n_tokens` tokens after `<|endoftext|>` + prefix, by a plain loop of forward passes."""
    tok = lm.tokenizer
    ids, new = [tok.convert_tokens_to_ids("<|endoftext|>")] + tok(prefix)["input_ids"], []
    with torch.no_grad():
        while len(new) < n_tokens:
            nxt = int(torch.argmax(lm.model(torch.tensor([ids + new])).logits[0, -1, :len(tok)]))
            new.append(nxt)
            if nxt == tok.eos_token_id:
                break
    return tok.decode(new, skip_special_tokens=True)


def test_the_memorising_model_recites_its_members(memorising):
    lm = memorising["lm"]
    losses = score_texts(lm, memorising["members"] + memorising["nonmembers"], ["loss"])["loss"].to_numpy()
    assert np.all(losses[:8] > -0.2) and np.all(losses[8:] < -5)  # −mean NLL: recited vs never seen
    for text in memorising["members"]:
        prefix, suffix, n_suffix = split_text(lm.tokenizer, text, NgramCoverageParams())
        assert greedy_continuation(lm, prefix, n_suffix) == suffix


@pytest.mark.parametrize("group", ["members", "nonmembers"])
def test_generate_matches_a_manual_greedy_loop(memorising, group):
    """top_p = 0.05 keeps only the most likely token: the continuations are the greedy one, scored by the port.

    For a member the greedy continuation is its suffix, word for word: coverage 1 by hand, creativity min(12, |R|)
    (one run of all |R| words counts for every n ≤ |R|), and with half the suffix's tokens sampled, the port's
    ref_length coverage of that half.
    """
    lm, text = memorising["lm"], memorising[group][0]
    stats = lm.token_stats([text])[0]
    prefix, suffix, n_suffix = split_text(lm.tokenizer, text, NgramCoverageParams())  # checked by hand above
    continuation = greedy_continuation(lm, prefix, n_suffix)
    gen, ref = casual_tokenize(unidecode(continuation)), casual_tokenize(unidecode(suffix))
    greedy = {"lm": lm, "n_samples": 2, "top_p": 0.05}
    result = score("ngram_coverage", stats, **greedy)
    assert [s["generation"] for s in result.details["samples"]] == [continuation] * 2
    assert result.details["max_new_tokens"] == n_suffix
    spans = authors_spans(gen, ref, 4) if len(gen) >= 4 else []
    assert result.value == pytest.approx(authors_coverage(gen, spans, 1, len(ref), True)[0], rel=1e-12)
    creativity = score("ngram_coverage", stats, statistic="creativity", **greedy).value
    assert creativity == pytest.approx(sum(authors_coverage(gen, spans, n, len(ref), True)[0] for n in range(1, 13)),
                                       rel=1e-12)
    half = score("ngram_coverage", stats, max_new_tokens=n_suffix // 2, normalization="ref_length", **greedy)
    cut = casual_tokenize(unidecode(half.details["samples"][0]["generation"]))
    cut_spans = authors_spans(cut, ref, 4) if len(cut) >= 4 else []
    assert half.value == pytest.approx(authors_coverage(cut, cut_spans, 1, len(ref), True)[1], rel=1e-12)
    as_authors = score("ngram_coverage", stats, mode="reference", **greedy)  # their substring test, end to end
    spans = authors_spans(gen, ref, 4, suffix) if len(gen) >= 4 else []
    md = MosesDetokenizer(lang="en").detokenize
    assert as_authors.value == pytest.approx(authors_coverage(gen, spans, 1, len(ref), True, detokenize=md)[0],
                                             rel=1e-12)
    if group == "members":
        assert continuation == suffix and result.value == 1.0 and creativity == min(12, len(ref))
        assert 0 < half.value < 1 and result.details["reproduced"] == [True] * len(ref)
    else:
        assert result.value < 0.5


def test_aggregates_and_no_log_probs_read(memorising):
    lm, text = memorising["lm"], memorising["members"][1]
    stats = lm.token_stats([text])[0]
    hot = {**PARTIAL, "n_samples": 6, "aggregate": "max"}
    result = score("ngram_coverage", stats, lm=lm, **hot)
    per = [s["score"] for s in result.details["samples"]]
    assert result.value == max(per) and len(per) == 6 and len(set(per)) > 2  # the samples differ
    for name, reduce in (("median", np.median), ("mean", np.mean), ("min", np.min)):
        assert score("ngram_coverage", stats, lm=lm, **{**hot, "aggregate": name}).value == pytest.approx(
            reduce(np.array(per, dtype=np.float64)), rel=1e-15)
    blind = dataclasses.replace(stats, logprob=np.full_like(stats.logprob, np.nan))  # no log-prob enters the score
    again = score("ngram_coverage", blind, lm=lm, **hot)
    assert again.value == result.value and not again.token_scores.any() and not again.selected.any()
    spec = METHODS["ngram_coverage"]
    assert (spec.needs, spec.access.generation, spec.token_level) == (("stats", "lm"), True, False)


def test_order_and_batching_do_not_change_scores(memorising):
    lm = memorising["lm"]
    texts = memorising["members"][:5] + memorising["nonmembers"][:5]
    values = score_texts(lm, texts, ["ngram_coverage"], **PARTIAL)["ngram_coverage"].to_numpy()
    assert np.all(values[:5] > 0) and len(set(values[:5].tolist())) >= 3  # real, distinct coverages to permute
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    shuffled = score_texts(lm, [texts[i] for i in order], ["ngram_coverage"], **PARTIAL)["ngram_coverage"].to_numpy()
    np.testing.assert_array_equal(shuffled, values[order])
    alone = [score("ngram_coverage", s, lm=lm, **PARTIAL).value for s in lm.token_stats(texts)]
    np.testing.assert_array_equal(alone, values)  # one text per `generate` call: the same draws
    other = score_texts(lm, texts, ["ngram_coverage"], seed=1, **PARTIAL)["ngram_coverage"].to_numpy()
    assert not np.array_equal(other, values)

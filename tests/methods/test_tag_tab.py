"""Tag&Tab against hand-built statistics and a naive recomputation from a tiny model's raw logits."""
from __future__ import annotations

import math
import re
import string

import numpy as np
import pytest
from wordfreq import word_frequency

from mia_core import TokenStats, score
from mia_core.methods.tag_tab import TagTabParams, split_sentences

from tests.support.oracle import naive_stats


def rel_close(a, b, tol=1e-5):
    assert abs(a - b) <= tol * max(1.0, abs(b)), (a, b)


def hand_stats(text, seed=0):
    """Made-up statistics: a special token (0, 0) first, then pieces of ≤ 3 word characters (a leading space
    attached) and single punctuation marks, with random log-probs."""
    spans = [(0, 0)] + [m.span() for m in re.finditer(r" ?\w{1,3}| ?[^\w\s]", text)]
    n = len(spans)
    zeros = np.zeros(n)
    logprob = np.random.default_rng(seed).uniform(-9.0, -0.1, n)
    return TokenStats(text=text, token_ids=np.arange(n), tokens=[text[a:b] or "<s>" for a, b in spans],
                      offsets=np.array(spans, dtype=np.int64), logprob=logprob, mu=zeros, sigma=zeros + 1,
                      top1_id=np.zeros(n, int), top1_logprob=zeros, entropy=zeros, rank=np.ones(n, int))


def expected_keywords(sentence, n):
    """(word, start, end) in the sentence of its n lowest-e distinct words, found by sorting here (ties: first seen)."""
    found, cursor = {}, 0
    for raw in sentence.split():
        start = sentence.index(raw, cursor)
        cursor = start + len(raw)
        word = "".join(c for c in raw.lower() if c not in string.punctuation)
        core = raw.strip(string.punctuation)
        if word and word not in found:
            a = start + raw.index(core)
            found[word] = (len(found), a, a + len(core))
    e = {}
    for word in found:
        p = word_frequency(word, "en")
        e[word] = -p * math.log2(p) if p > 0 else 0.0
    ranked = sorted(found, key=lambda w: (e[w], found[w][0]))[:n]
    return [(w, found[w][1], found[w][2]) for w in ranked]


def naive_tag_tab(text, sentences, offsets, logprob, n, first_only=False):
    """Mean log-prob over the tokens overlapping the keywords of each of `sentences` (the tagged ones, in order)."""
    chosen, cursor = set(), 0
    for sentence in sentences:
        start = text.index(sentence, cursor)
        cursor = start + len(sentence)
        for _, a, b in expected_keywords(sentence, n):
            hits = [i for i, (s, e) in enumerate(offsets) if e > s and s < start + b and e > start + a]
            chosen.update(hits[:1] if first_only else hits)
    return float(np.mean([logprob[i] for i in sorted(chosen)])), chosen


S1 = "The ancient harbour was built of quartz and saffron stone."
S2 = "Seventeen merchants sold a painted violin near the old cathedral."


def test_keyword_count_and_score_by_hand():
    for n, words in [(1, ["saffron"]), (2, ["saffron", "quartz"]), (4, ["saffron", "quartz", "harbour", "ancient"])]:
        assert [w for w, _, _ in expected_keywords(S1, n)] == words  # the oracle's own ranking, checked by hand
        s = score("tag_tab", hand_stats(S1), n_keywords=n)
        assert [row["keyword"] for row in s.details["keywords"]] == words  # n keywords: ranks 0 … n−1
    text = f"{S1} {S2}"
    stats = hand_stats(text)
    for n in (1, 3, 4, 50):
        want, chosen = naive_tag_tab(text, [S1, S2], stats.offsets.tolist(), stats.logprob, n)
        got = score("tag_tab", stats, n_keywords=n)
        rel_close(got.value, want)
        assert set(np.flatnonzero(got.selected).tolist()) == chosen
        assert got.token_scores.tolist() == stats.logprob.tolist() and got.k is None
    got = score("tag_tab", stats)
    rows = got.details["keywords"]
    assert [r["sentence"] for r in rows] == [1] * 4 + [2] * 4 and not got.details["no_eligible_sentence"]
    for r in rows:
        assert r["frequency"] == word_frequency(r["keyword"], "en")
    # "saffron" = tokens " saf", "fro", "n"; the period after "stone" is a token of its own and never selected
    saffron = S1.index("saffron")
    assert [stats.tokens[i] for i in np.flatnonzero(got.selected) if stats.offsets[i, 0] >= saffron - 1][:3] == \
        [" saf", "fro", "n"]
    assert not got.selected[0]  # the special token


def test_first_token_variant():
    text = f"{S1} {S2}"
    stats = hand_stats(text, seed=3)
    want, chosen = naive_tag_tab(text, [S1, S2], stats.offsets.tolist(), stats.logprob, 4, first_only=True)
    got = score("tag_tab", stats, first_token_only=True)
    rel_close(got.value, want)
    assert got.selected.sum() == 8 and set(np.flatnonzero(got.selected).tolist()) == chosen
    # by hand: S1's saffron, quartz, harbour, ancient and S2's violin, merchants, seventeen, cathedral
    assert sorted(stats.tokens[i] for i in np.flatnonzero(got.selected)) == sorted(
        [" saf", " qua", " har", " anc", " vio", " mer", " Sev", " cat"])
    assert got.value != score("tag_tab", stats).value


def test_tokens_out_of_text_order_are_found_too():
    stats = hand_stats(f"{S1} {S2}", seed=4)
    order = np.random.default_rng(1).permutation(stats.n_scored)  # spans no longer rise: the scan path
    shuffled = TokenStats(**{**stats.__dict__, "offsets": stats.offsets[order], "logprob": stats.logprob[order],
                             "tokens": [stats.tokens[i] for i in order]})
    straight, mixed = score("tag_tab", stats), score("tag_tab", shuffled)
    rel_close(mixed.value, straight.value)
    assert mixed.selected.tolist() == straight.selected[order].tolist()


def test_repeated_word_maps_to_its_own_sentence():
    first = "Saffron was sold by the old merchant in the square."
    second = "The cook put saffron and saffron into the pot today."
    text = f"{first} {second}"
    stats = hand_stats(text, seed=5)
    got = score("tag_tab", stats, n_keywords=1)
    assert [r["keyword"] for r in got.details["keywords"]] == ["saffron", "saffron"]
    picked = {int(stats.offsets[i, 0]) for i in np.flatnonzero(got.selected)}
    own = len(first) + 1 + second.index("saffron")  # the first "saffron" of the second sentence
    assert 0 in picked and own - 1 in picked  # "Saf" at 0; " sa" just before the second sentence's word
    assert not any(p >= own + len("saffron") for p in picked)  # its repeat in the same sentence is not used
    want, _ = naive_tag_tab(text, [first, second], stats.offsets.tolist(), stats.logprob, 1)
    rel_close(got.value, want)
    tokens_of_first = [i for i, (a, b) in enumerate(stats.offsets.tolist()) if 0 <= a and b <= 7 and b > a]
    assert got.value != pytest.approx(float(np.mean(stats.logprob[tokens_of_first])))  # not the reference's find()


def test_short_sentences_fall_back_to_the_whole_text():
    text = "Quartz river. Saffron castle!\nOld bells."
    stats = hand_stats(text, seed=2)
    got = score("tag_tab", stats, n_keywords=2)
    assert got.details["no_eligible_sentence"] and got.details["sentences"] == 1
    assert [r["keyword"] for r in got.details["keywords"]] == ["saffron", "quartz"]
    want, _ = naive_tag_tab(text, [text], stats.offsets.tolist(), stats.logprob, 2)
    rel_close(got.value, want)
    # with min_words=2 the three sentences qualify, each giving its own two keywords
    per_sentence = score("tag_tab", stats, n_keywords=2, min_words=2)
    assert not per_sentence.details["no_eligible_sentence"] and per_sentence.details["sentences"] == 3
    assert [r["keyword"] for r in per_sentence.details["keywords"]][2:4] == ["saffron", "castle"]


def test_matches_naive_recomputation_on_tiny_llama(llama_lm):
    sentences = ["The merchant built a silver lantern for the cathedral.",
                 "Saffron and quartz were found near the glacier by the north harbour!",
                 "Comet.",  # one word: not tagged
                 "Is the ancient orchard founded on the meadow of the cathedral?"]
    text = " ".join(sentences)
    stats = llama_lm.token_stats([text])[0]
    tok = llama_lm.tokenizer
    enc = tok(text, return_offsets_mapping=True)
    ids = [tok.convert_tokens_to_ids("<|endoftext|>")] + enc["input_ids"]
    lp = naive_stats(llama_lm.model, ids)["logprob"]
    tagged = [s for s in sentences if len(s.split()) >= 7]
    for first_only in (False, True):
        for n in (2, 4):
            want, chosen = naive_tag_tab(text, tagged, enc["offset_mapping"], lp, n, first_only)
            got = score("tag_tab", stats, n_keywords=n, first_token_only=first_only)
            rel_close(got.value, want)
            assert set(np.flatnonzero(got.selected).tolist()) == chosen
    assert score("tag_tab", stats).details["sentences"] == 3


def test_splitter():
    text = 'He said "no." "Yes," she replied. Dr. smith went home! Then 3 cats ran?\nA new line. e.g. this stays'
    assert [text[a:b] for a, b in split_sentences(text)] == [
        'He said "no."', '"Yes," she replied.', "Dr. smith went home!", "Then 3 cats ran?", "A new line. e.g. this stays"]
    assert split_sentences("  \n ") == []


def test_errors_are_clear():
    stats = hand_stats(S1)
    no_offsets = TokenStats(**{**stats.__dict__, "offsets": np.zeros_like(stats.offsets)})  # a slow tokenizer
    with pytest.raises(ValueError, match="no keyword overlaps a scored token"):
        score("tag_tab", no_offsets)
    with pytest.raises(ValueError, match="has no word"):
        score("tag_tab", hand_stats("... !"))
    for bad, match in [({"n_keywords": 0}, "n_keywords must be"), ({"n_keywords": 0.5}, "n_keywords must be"),
                       ({"min_words": 10, "max_words": 5}, "max_words must be"),
                       ({"first_token_only": "yes"}, "first_token_only"), ({"language": "xx"}, "language must be")]:
        with pytest.raises(ValueError, match=match):
            TagTabParams(**bad)

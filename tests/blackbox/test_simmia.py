"""SimMIA's pure parts (METHODS-API.md §20): words that join back to the text, first words, SimMIA* on a case worked
out by hand, the soft score against a plain float64 recomputation, the per-token view, and the chat procedure's
requests, seeds and attempt cap through a scripted `send` (no network)."""
from __future__ import annotations

import hashlib
import json
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from mia_core.blackbox.simmia import (EMBEDDERS, embedder, label_frequency, label_hit, nonmember_prefix,
                                      sample_words, score_positions, token_ratios)
from mia_core.blackbox.simmia_sampling import SYSTEM_PROMPT, SimMiaSettings, request_seed, simmia_text
from mia_core.blackbox.simmia_words import extract_first_word, word_spans, word_tokenize
from mia_core.model.chat.answers import ChatAnswer, Choice

TRICKY = [
    'He said "hi" and \'\'yes\'\' -- then left...',
    '"Quoted start" and a ``TeX quote\'\' here.',
    "  leading spaces,   several   inside,\ttabs\n\nand blank lines\n",
    "Café naïve façade — 日本語のテキスト 😀! Ünïcödé «guillemets» ‘curly’ “double”.",
    "can't won't gonna (parens) [brackets] {braces} <angles> $5 & 3% @home #tag",
    "Mr. Smith. Dr. Who. end.",
    '""',
    "x",
    "   ",
    "",
    "a\u00a0b\u2003c",  # no-break and em spaces
    "'single' quotes, it's O'Brien's",
]


@pytest.mark.parametrize("text", TRICKY)
def test_words_join_back_to_the_text_and_carry_their_leading_whitespace(text):
    words = word_tokenize(text)
    assert "".join(words) == text
    assert all(words)  # no empty word
    for word in words[1:]:
        assert word.strip(), f"a word of whitespace alone: {words}"
    assert word_spans(words)[-1][1] == len(text) if words else text == ""


def test_words_join_back_on_random_strings():
    alphabet = list("ab c.,;:!?\"'`()-\n\t") + ["''", "``", "é", "日", "😀", "  ", "..."]
    rng = random.Random(5)
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert "".join(word_tokenize(text)) == text


def test_words_by_hand():
    assert word_tokenize('He said  "hi".\n') == ["He", " said", '  "', "hi", '"', ".\n"]
    assert word_tokenize("The cat sat.") == ["The", " cat", " sat", "."]
    assert word_tokenize("  It ended. Then") == ["  It", " ended.", " Then"]  # no sentence split (module docstring)
    assert word_spans(["The", " cat", "."]) == [(0, 3), (3, 7), (7, 8)]


def test_first_word_of_a_sample():
    assert extract_first_word("Ġcastle walls") == "castle"
    assert extract_first_word("▁river") == "river"
    assert extract_first_word(' "Yes," she said') == "``"
    assert extract_first_word(" can't") == "ca"
    assert extract_first_word("") == "" and extract_first_word(" \n") == " \n"  # nothing found: the string as given


def test_nonmember_prefix_modes():
    assert nonmember_prefix(["A.", "B."]) == "A.\n\nB.\n\n"
    assert nonmember_prefix(["A.", "B."], "reference") == "A.B."
    with pytest.raises(ValueError, match="mode"):
        nonmember_prefix(["A."], "theirs")


def test_sample_words_keep_the_order_of_the_most_common_samples():
    # raw counts: "dog" 2, "cat" 1 (drawn first), " cat" 1 → the words in that order, " cat" merged into "cat"
    assert list(sample_words(["cat", "dog", " cat", "dog"]).items()) == [("dog", 2), ("cat", 2)]


# "The cat sat." → words The | cat | sat | . ; positions k = 1, 2, 3 with labels "cat", "sat", "."
HAND_WORDS = ["The", " cat", " sat", "."]
HAND_PLAIN = [["cat", "cat", "dog", " cat"], ["sat"] * 4, ["!", "?", "!", "!"]]
HAND_PRIMED = [["dog", "dog", "cats", "bird"], ["ran", "Sa", "ran", "ran"], [".", ".", "!", "."]]


def test_simmia_star_by_hand():
    """Worked out by hand, with the spec's smoothing (+1 per sample word, +1 to an absent label nothing hit):

    k=1  plain {cat 3, dog 1}: cat sampled → cat 4, dog 2 of 6: f = 2/3
         primed {dog 2, cats 1, bird 1}: "cat" absent, "cats" starts with it → hit; dog 3, cats 2, bird 2 of 7: 2/7
         r1 = (2/7)/(2/3) = 3/7
    k=2  plain {sat 4} → 5 of 5: f = 1;  primed {ran 3, Sa 1}: "sat" starts with "sa" → Sa 2 of 6: 1/3;  r2 = 1/3
    k=3  plain {! 3, ? 1}: "." absent, nothing hit → ! 4, ? 2, . 1 of 7: 1/7
         primed {. 3, ! 1} → . 4 of 6: 2/3;  r3 = (2/3)/(1/7) = 14/3
    score = −(3/7 + 1/3 + 14/3)/3 = −38/21
    """
    scored = score_positions(HAND_WORDS, HAND_PLAIN, HAND_PRIMED)
    r = [p["r_star"] for p in scored.positions]
    expected = [Fraction(3, 7), Fraction(1, 3), Fraction(14, 3)]
    assert r == pytest.approx([float(x) for x in expected], rel=1e-15)
    assert scored.simmia_star == pytest.approx(float(-Fraction(38, 21)), rel=1e-15) and scored.simmia is None
    assert [(p["hit"], p["hit_prefix"]) for p in scored.positions] == [("cat", "cats"), ("sat", "Sa"), (None, ".")]
    assert [(p["start"], p["end"]) for p in scored.positions] == [(3, 7), (7, 11), (11, 12)]
    assert [p["f"] for p in scored.positions] == pytest.approx([2 / 3, 1.0, 1 / 7], rel=1e-15)


def test_simmia_star_in_reference_mode_by_hand():
    """The code adds +1 a second time to a sampled label: k=1 cat 5 of 7 → r1 = (2/7)/(5/7) = 2/5; k=2 sat 6 of 6 →
    r2 = 1/3; k=3 primed . 5 of 7 → r3 = (5/7)/(1/7) = 5; score = −(2/5 + 1/3 + 5)/3 = −86/45."""
    scored = score_positions(HAND_WORDS, HAND_PLAIN, HAND_PRIMED, mode="reference")
    assert [p["r_star"] for p in scored.positions] == pytest.approx([0.4, 1 / 3, 5.0], rel=1e-15)
    assert scored.simmia_star == pytest.approx(-86 / 45, rel=1e-15)


def test_a_blank_sample_word_stands_in_for_a_label_only_in_reference_mode():
    counts = {"": 2, "cat": 1}
    assert label_hit("dog", counts) is None and label_hit("dog", counts, mode="reference") == ""
    assert label_frequency("dog", counts) == (1 / 6, None)  # "" 3, cat 2, dog 1
    assert label_frequency("dog", counts, mode="reference") == (3 / 5, "")  # "" 3, cat 2: the blank counts


def test_every_position_counts_and_an_unsampled_one_is_left_out():
    words = ["a", " b", " c", " d"]
    plain = [["b"], ["x"], []]  # position 3 has no sample without the prefix
    primed = [["b"], ["c"], ["d"]]
    scored = score_positions(words, plain, primed)
    # k=1: f = 2/2 both → 1;  k=2: plain {x}: c absent → x 2, c 1: 1/3; primed {c} → 2/2 = 1 → r = 3;  k=3 left out
    assert [p["r_star"] for p in scored.positions] == [1.0, 3.0, None]
    assert scored.simmia_star == -2.0 and scored.n_scored == 2


class ToyEmbedder:
    """Deterministic word vectors from SHA-256 (8 dims, signed): stands in for MiniLM in tests."""

    name = "toy-sha256-8"
    sha256 = hashlib.sha256(b"toy-sha256-8").hexdigest()

    def __call__(self, words: list[str]) -> np.ndarray:
        return np.array([[b - 128 for b in hashlib.sha256(w.encode()).digest()[:8]] for w in words], np.float32)


def naive_soft(label: str, samples: list[str], vec) -> float:
    """S_k by the spec, word by word in float64: f_w = count/N, sim = cos, (sim + 1)/2."""
    words = [extract_first_word(s) for s in samples]
    out = 0.0
    for w in dict.fromkeys(words):
        a, b = vec(label), vec(w)
        cos = sum(x * y for x, y in zip(a, b)) / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))
        out += words.count(w) / len(words) * (cos + 1) / 2
    return out


def test_soft_score_against_a_naive_float64_recomputation():
    toy = ToyEmbedder()

    def vec(word):
        return [float(x) for x in toy([word])[0]]

    scored = score_positions(HAND_WORDS, HAND_PLAIN, HAND_PRIMED, embed=toy)
    labels = ["cat", "sat", "."]
    ratios = []
    for label, plain, primed, p in zip(labels, HAND_PLAIN, HAND_PRIMED, scored.positions):
        s, s_p = naive_soft(label, plain, vec), naive_soft(label, primed, vec)
        assert (p["S"], p["S_prefix"]) == pytest.approx((s, s_p), rel=1e-12)
        ratios.append(s_p / (s + 1e-11))
    assert scored.simmia == pytest.approx(-sum(ratios) / 3, rel=1e-12)
    assert scored.simmia_star == pytest.approx(-38 / 21, rel=1e-15)  # SimMIA* comes with it, named apart
    assert scored.positions[1]["S"] == pytest.approx(1.0, rel=1e-12)  # every sample is the label: cos 1


def test_exact_match_numbers():
    scored = score_positions(["x", " 1,000"], [["1000", "7"]], [["7", "7"]], embed=ToyEmbedder(),
                             exact_match_number=True)
    p = scored.positions[0]
    # plain: 1000 = 1,000 (sim 1) and 7 (sim −1), half each → 0.5; primed: all 7 → 0
    assert (p["S"], p["S_prefix"]) == (0.5, 0.0) and p["r"] == 0.0


def test_embedder_registry_checks_the_recorded_sha(monkeypatch):
    monkeypatch.setitem(EMBEDDERS, "toy", ToyEmbedder)
    assert embedder("toy", ToyEmbedder.sha256).name == "toy-sha256-8"
    with pytest.raises(ValueError, match="not the"):
        embedder("toy", "0" * 64)
    with pytest.raises(ValueError, match="no word embedder 'nothing'"):
        embedder("nothing")


def test_token_view_maps_each_word_ratio_to_its_tokens():
    positions = score_positions(HAND_WORDS, HAND_PLAIN, HAND_PRIMED).positions
    # tokens: "The" | " c" "at" | " sat" | "." and a special token with no span
    offsets = np.array([[0, 3], [3, 5], [5, 7], [7, 11], [11, 12], [0, 0]])
    scores, selected = token_ratios(positions, offsets)
    assert selected.tolist() == [False, True, True, True, True, False]
    assert scores.tolist() == pytest.approx([1.0, 3 / 7, 3 / 7, 1 / 3, 14 / 3, 1.0], rel=1e-15)


def answer(*texts: str | None, finish: str = "stop") -> ChatAnswer:
    return ChatAnswer(tuple(Choice(t, finish) for t in texts), 10, len(texts), "fake-2026")


def test_the_procedure_numbers_its_steps_seeds_its_requests_and_caps_empty_positions():
    text = "The cat sat."
    settings = SimMiaSettings(nonmembers=("Known.",), samples=3, per_request=2, max_calls=3)
    sent = []

    def send(step, body):
        sent.append((step, body))
        user = body["messages"][1]["content"]
        if "Known." in user:
            return answer("", "")  # the primed context never gives a sample: each position stops at max_calls
        return answer("cat", "I'm sorry, but I can't continue.")  # one sample, one refusal per call

    result = simmia_text(text, "m", "chat", settings, send)
    steps = [s for s, _ in sent]
    # plain: 3 positions × 3 calls (one sample a call); primed: 3 positions × max_calls 3, none answered a sample
    assert steps == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]
    first = sent[0][1]
    assert first == {"model": "m", "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                                                 {"role": "user", "content": 'Text so far: "The"'}],
                     "n": 2, "seed": request_seed(42, text, 0, 1, 0)}
    assert sent[2][1]["n"] == 1  # two samples in, one asked
    assert sent[9][1]["messages"][1]["content"] == 'Text so far: "Known.\n\nThe"'
    assert result["positions_scored"] == 0 and result["simmia_star_score"] is None and result["positions_short"] == 3
    assert (result["refusals"], result["empty"], result["requests"]) == (9, 18, 18)
    assert result["variant"] == "SimMIA*" and json.loads(json.dumps(result)) == result  # JSON as stored


def test_settings_are_checked_and_rebuilt_from_a_manifest():
    with pytest.raises(ValueError, match="non-member"):
        SimMiaSettings()
    with pytest.raises(ValueError, match="cannot reach"):
        SimMiaSettings(nonmembers=("a",), samples=10, per_request=1, max_calls=4)
    with pytest.raises(ValueError, match="together"):
        SimMiaSettings(nonmembers=("a",), embedding="toy")
    settings = SimMiaSettings(nonmembers=["a", "b"])
    assert settings.nonmembers == ("a", "b") and settings.variant == "SimMIA*"
    assert SimMiaSettings(**json.loads(json.dumps(settings.__dict__))) == settings

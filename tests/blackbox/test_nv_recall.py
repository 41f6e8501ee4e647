"""nv_recall against a separate recomputation from METHODS-API.md §17, merge rules at their boundaries, hand counts."""
from __future__ import annotations

import random
from difflib import SequenceMatcher

import pytest

from mia_core.blackbox import normalize as norm
from mia_core.blackbox.nv_recall import (MAX_WORDS, PAPER_PASSES, PHASE1_THRESHOLD, Block, diff_segments,
                                         longest_common_run, loose_match, loose_match_normalized, nv_recall,
                                         nv_recall_union)

PASS1, PASS2 = PAPER_PASSES


def reference(book: list[str], generation: list[str], passes, *, autojunk: bool = False,
              abs_align: bool = True) -> dict:
    """§17 recomputed plainly: difflib blocks, then per pass merge-while-close and filter; `abs_align=False` is the
    third-party port's rule, `(Δ_B − Δ_G) ≤ τ_align`."""
    raw = SequenceMatcher(None, book, generation, autojunk=autojunk).get_matching_blocks()
    assert tuple(raw[-1]) == (len(book), len(generation), 0)
    blocks = [[i, i + m, j, j + m, m, [(i, j, m)]] for i, j, m in raw[:-1]]  # book span, gen span, m̃, parts
    for tau_gap, tau_align, least in passes:
        merged, k = [], 0
        while k < len(blocks):
            current = list(blocks[k])
            k += 1
            while k < len(blocks):
                d_book, d_gen = blocks[k][0] - current[1], blocks[k][2] - current[3]
                aligned = abs(d_book - d_gen) <= tau_align if abs_align else d_book - d_gen <= tau_align
                if not (d_book <= tau_gap and d_gen <= tau_gap and aligned):
                    break
                nxt = blocks[k]
                current = [current[0], nxt[1], current[2], nxt[3], current[4] + nxt[4], current[5] + nxt[5]]
                k += 1
            merged.append(current)
        blocks = [b for b in merged if b[4] >= least]
    m = sum(b[4] for b in blocks)
    return {"blocks": [(b[0], b[1], b[2], b[3], b[4], tuple(b[5])) for b in blocks], "m": m,
            "missing": len(book) - m, "additional": len(generation) - m, "nv_recall": m / len(book),
            "max_block": max((b[4] for b in blocks), default=0), "max_span": max((b[1] - b[0] for b in blocks),
                                                                               default=0)}


def ours(book: str, generation: str, passes, mode: str = "autojunk_off") -> dict:
    """The module's result in the reference's shape."""
    r = nv_recall(book, generation, passes=passes, mode=mode)
    for block in r.blocks:
        assert (block.i, block.j) == (block.span_book[0], block.span_generation[0])
    return {"blocks": [(*b.span_book, *b.span_generation, b.m, b.parts) for b in r.blocks], "m": r.m,
            "missing": r.missing, "additional": r.additional, "nv_recall": r.nv_recall, "max_block": r.max_block,
            "max_span": r.max_span}


BOOK = [f"w{k}" for k in range(400)]


def filler(n: int, tag: str = "x") -> list[str]:
    """n words that are not in BOOK."""
    return [f"{tag}{k}" for k in range(n)]


def two_blocks(first: int, d_book: int, d_gen: int, second: int) -> list[str]:
    """A generation: BOOK[0:first], d_gen filler words, then `second` book words after a gap of d_book."""
    return BOOK[:first] + filler(d_gen) + BOOK[first + d_book : first + d_book + second]


def check(generation: list[str], passes, book: list[str] = BOOK, mode: str = "autojunk_off") -> dict:
    """Our result, asserted equal to the reference's, on texts that normalisation leaves as they are."""
    book_text, gen_text = " ".join(book), " ".join(generation)
    assert norm.words(book_text) == book and norm.words(gen_text) == generation
    got = ours(book_text, gen_text, passes, mode)
    assert got == reference(book, generation, passes, autojunk=mode == "difflib_default")
    return got


@pytest.mark.parametrize(("passes", "d_book", "d_gen", "merged"), [
    ((PASS1,), 2, 2, True), ((PASS1,), 3, 3, False),  # max(Δ) at τ_gap and τ_gap + 1
    ((PASS1,), 2, 1, True), ((PASS1,), 2, 0, False),  # |Δ_B − Δ_G| at τ_align and τ_align + 1
    ((PASS1,), 0, 1, True), ((PASS1,), 0, 2, False),  # negative Δ_B − Δ_G: the abs matters
    (PAPER_PASSES, 10, 10, True), (PAPER_PASSES, 11, 11, False),
    (PAPER_PASSES, 10, 7, True), (PAPER_PASSES, 10, 6, False),
    (PAPER_PASSES, 7, 10, True), (PAPER_PASSES, 6, 10, False),
])
def test_merge_rule_at_its_boundaries(passes, d_book, d_gen, merged):
    # pass 2 cases: two 60-word blocks too far apart for pass 1 (Δ > 2 or misaligned), each < 100 alone
    got = check(two_blocks(60, d_book, d_gen, 60), passes)
    if passes == (PASS1,):
        assert len(got["blocks"]) == (1 if merged else 2) and got["m"] == 120
    else:
        assert got["m"] == (120 if merged else 0)
    if merged:
        assert got["blocks"][0][:4] == (0, 120 + d_book, 0, 120 + d_gen)
        assert got["max_span"] == 120 + d_book and got["max_block"] == 120


@pytest.mark.parametrize(("passes", "d_book", "d_gen"), [((PASS1,), 0, 2), (PAPER_PASSES, 6, 10)])
def test_negative_difference_that_the_third_party_port_merges(passes, d_book, d_gen):
    book, generation = BOOK, two_blocks(60, d_book, d_gen, 60)
    third_party = reference(book, generation, passes, abs_align=False)
    assert check(generation, passes) != third_party
    assert len(third_party["blocks"]) == 1


@pytest.mark.parametrize(("passes", "size", "kept"), [
    ((PASS1,), 19, False), ((PASS1,), 20, True), (PAPER_PASSES, 99, False), (PAPER_PASSES, 100, True),
])
def test_filter_at_l_minus_one_and_l(passes, size, kept):
    got = check(filler(5, "y") + BOOK[50 : 50 + size] + filler(5, "z"), passes)
    assert got["m"] == (size if kept else 0) and got["missing"] == len(BOOK) - got["m"]
    assert got["additional"] == size + 10 - got["m"]


def test_pass_two_measures_gaps_from_the_span_end_not_from_i_plus_m():
    # pass 1 joins BOOK[0:40] and BOOK[42:80] (Δ = 2, 2): span ends at 80, m̃ = 78; the next block starts 10 after
    generation = BOOK[:40] + filler(2) + BOOK[42:80] + filler(10, "y") + BOOK[90:120]
    got = check(generation, PAPER_PASSES)
    assert got["blocks"] == [(0, 120, 0, 120, 108, ((0, 0, 40), (42, 42, 38), (90, 90, 30)))]


def test_hand_counted_case():
    book = " ".join(f"w{k}" for k in range(12))
    generation = "w0 w1 w2 x w3 w4 w6 w7 w8 y1 y2 y3 y4 w9 w10 w11"
    # blocks (0,0,3) (3,4,2) (6,6,3) (9,13,3); pass 1 (1,1,2) merges the first three (Δ = (0,1), (1,0)),
    # not the fourth (Δ_G = 4); pass 2 (3,4,6) cannot merge (Δ_G = 4 > 3) and drops the 3-word block.
    r = nv_recall(book, generation, passes=((1, 1, 2), (3, 4, 6)))
    assert r.blocks == (Block(0, 0, 8, (0, 9), (0, 9), ((0, 0, 3), (3, 4, 2), (6, 6, 3))),)
    assert (r.m, r.missing, r.additional, r.max_block, r.max_span) == (8, 4, 8, 8, 9)
    assert (r.n_book, r.n_generation, r.nv_recall) == (12, 16, pytest.approx(2 / 3))
    assert diff_segments(book, generation, r) == [
        ("verbatim", "w0 w1 w2"), ("additional", "x"), ("verbatim", "w3 w4"), ("missing", "w5"),
        ("verbatim", "w6 w7 w8"), ("missing", "w9 w10 w11"), ("additional", "y1 y2 y3 y4 w9 w10 w11")]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("mode", ["autojunk_off", "difflib_default"])
def test_random_edits_equal_the_reference(seed, mode):
    rng = random.Random(seed)
    book = [rng.choice(["the", "a", "of"]) if rng.random() < 0.2 else f"v{rng.randrange(150)}" for _ in range(600)]
    generation, at = [], 0
    while at < len(book):
        run = rng.randint(3, 60)
        generation += book[at : at + run] + filler(rng.randint(0, 12), f"g{at}q")
        at += run + rng.randint(0, 12)
    passes = ((rng.randint(0, 4), rng.randint(0, 3), rng.randint(1, 10)), (rng.randint(2, 15), 3, 25))
    got = check(generation, passes, book=book, mode=mode)
    parts = [p for block in got["blocks"] for p in block[5]]
    book_text, gen_text = " ".join(book), " ".join(generation)
    segments = diff_segments(book_text, gen_text, nv_recall(book_text, gen_text, passes=passes, mode=mode))
    assert " ".join(t for kind, t in segments if kind != "additional") == book_text
    assert " ".join(t for kind, t in segments if kind != "missing") == gen_text
    assert sum(len(t.split()) for kind, t in segments if kind == "verbatim") == sum(p[2] for p in parts)


def test_autojunk_on_and_off_differ_where_a_frequent_word_is_the_match():
    # "the" is 10 of 250 generation words (> 1 %, |G| ≥ 200): with autojunk it cannot seed a match
    book = BOOK[:20] + ["the"] * 3 + BOOK[20:40]
    generation = filler(100) + ["the"] * 3 + filler(137, "y") + ["the"] * 7 + filler(3, "z")
    off, on = check(generation, ((0, 0, 3),), book=book), check(generation, ((0, 0, 3),), book=book,
                                                                mode="difflib_default")
    assert off["m"] == 3 and on["m"] == 0


def test_union_over_runs_counts_verbatim_parts_only():
    book = " ".join(BOOK[:100])
    gap_run = nv_recall(book, " ".join(BOOK[:40] + BOOK[41:80]), passes=(PASS1,))  # merged across word 40
    tail_run = nv_recall(book, " ".join(BOOK[70:100]), passes=(PASS1,))
    assert gap_run.nv_recall == pytest.approx(0.79) and len(gap_run.blocks) == 1
    assert nv_recall_union(book, [gap_run]) == pytest.approx(0.79)
    assert nv_recall_union(book, [gap_run, tail_run]) == pytest.approx(0.99)
    assert nv_recall_union(book, []) == 0.0
    with pytest.raises(ValueError, match="of this book"):
        nv_recall_union(" ".join(BOOK[:50]), [gap_run])


def test_max_words_refused_in_one_sentence():
    big = "w " * (MAX_WORDS + 1)
    with pytest.raises(ValueError, match=rf"book has {MAX_WORDS + 1:,} words .* at most {MAX_WORDS:,}\.$"):
        nv_recall(big, "w")
    with pytest.raises(ValueError, match="generation has"):
        nv_recall("w", big)


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="did you mean 'autojunk_off'"):
        nv_recall("a", "a", mode="autojunk_of")
    with pytest.raises(ValueError, match="passes"):
        nv_recall("a", "a", passes=((2, 1, 0),))
    with pytest.raises(ValueError, match="no words"):
        nv_recall(" \n", "a")
    assert nv_recall("a b", "", passes=((0, 0, 1),)).additional == 0


@pytest.mark.parametrize("char", list("\u201c\u201d\u201e\u201f\u00ab\u00bb\u301d\u301e\u301f"))  # “ ” „ ‟ « » 〝 〞 〟
def test_double_quotes(char):
    assert norm.normalize(f"A{char}b") == 'a"b'


@pytest.mark.parametrize("char", list("\u2018\u2019\u201a\u201b\u2039\u203a\u02bc"))  # ‘ ’ ‚ ‛ ‹ › ʼ
def test_single_quotes(char):
    assert norm.normalize(f"don{char}t") == "don't"


@pytest.mark.parametrize("char", list("\u2012\u2013\u2015\u2e3a\u2e3b"))  # ‒ – ― ⸺ ⸻
def test_dashes(char):
    assert norm.normalize(f"a{char}b") == "a\u2014b"


def test_tables_are_the_ones_tested_here():
    assert (norm.DOUBLE_QUOTES, norm.SINGLE_QUOTES, norm.DASHES) == (
        "\u201c\u201d\u201e\u201f\u00ab\u00bb\u301d\u301e\u301f", "\u2018\u2019\u201a\u201b\u2039\u203a\u02bc",
        "\u2012\u2013\u2015\u2e3a\u2e3b")  # a change here must bump NORMALIZATION_VERSION
    assert norm.NORMALIZATION_VERSION == "1"


@pytest.mark.parametrize(("text", "expected"), [
    ("wait\u2026what", "wait... what"), ("end\u2026", "end..."),  # …, then a space before a letter
    ("a . . . b", "a ... b"), ("so. . .Then", "so... then"), ("x . . . . y", "x .... y"),  # spaced dots
    ("3...4", "3... 4"), ("wait...\u201d", 'wait..."'), (". .", ". ."),
    ("an _italic_ word", "an italic word"), ("_two words_", "two words"), ("a_b", "a_b"),
    ("\ufb01ne \uff21\uff22 \u00b2 \uff02q\uff02 \ufe58", 'fine ab 2 "q" \u2014'),  # NFKC: ligature, fullwidth, …
    ("\u00c0 Hello, World! - \u2010 \u2212 snake_case", "\u00e0 hello, world! - \u2010 \u2212 snake_case"),
])
def test_normalize_rules(text, expected):
    assert norm.normalize(text) == expected


def test_words_split_the_normalized_text():
    assert norm.words("  The\u00a0cat\u2026sat\n") == ["the", "cat...", "sat"]


def test_loose_match():
    assert loose_match("a b c d", "x b c d y") == 0.75
    assert loose_match("The cat sat", "the cat sat") == pytest.approx(2 / 3)  # raw: "The" ≠ "the"
    assert loose_match_normalized("The \u201ccat\u201d sat", 'the "cat" sat') == 1.0
    assert loose_match("a b", "") == 0.0 and loose_match("a b a b", "b a b a b") == 1.0
    assert longest_common_run(["a", "a", "b"], ["a", "b", "a", "a", "b"]) == 3
    assert PHASE1_THRESHOLD == 0.6
    with pytest.raises(ValueError, match="no words"):
        loose_match(" ", "a")

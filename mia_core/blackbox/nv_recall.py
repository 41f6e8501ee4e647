"""Near-verbatim recall of a book from a model's long generation, and Phase 1's loose match (METHODS-API.md §17).

Ahmed, Cooper, Koyejo & Liang, arXiv 2601.02671: Eq. 1–2 (the Phase 1 loose match), §3.3.1, Alg. 1, App. B and
C.3 (nv_recall). Not a membership score: evidence that a model reproduces a text near-verbatim, and a **loose lower
bound** of it (out-of-order or repeated extraction lands in `missing`/`additional`). Only final blocks of at least
100 words support a claim, and only about that text.

- Words: `normalize.words` (the §C.3 normalisation, then whitespace split) of the book `B` and the generation `G`.
- Identify: `difflib.SequenceMatcher(None, B, G).get_matching_blocks()` without its final `(len, len, 0)`.
  `autojunk` is **unconfirmed** in the paper; ours: `mode="autojunk_off"` (every word can match), and
  `mode="difflib_default"` reproduces Python's default (words over 1 % of a generation of ≥ 200 words are "popular"
  and cannot seed a match).
- Merge (Eq. 4), left to right against the current merged block: `Δ_B`, `Δ_G` = the next block's start − the
  merged span's end; merge when `max(Δ_B, Δ_G) ≤ τ_gap` and `|Δ_B − Δ_G| ≤ τ_align`. The third-party port
  (`GEizaguirre/memorization-LLM-prod`) omits the `abs`; we follow the paper. `m̃` counts verbatim words only.
- Filter (Eq. 5): keep `m̃ ≥ l`. Passes (paper §4.1): `(τ_gap, τ_align, l) = (2, 1, 20)`, then `(10, 3, 100)`;
  pass 2 merges the blocks pass 1 kept.
- Metrics (Eq. 6–8): `m = Σ m̃`, `nv_recall = m/|B|` (a fraction here; the paper prints %), `missing = |B| − m`,
  `additional = |G| − m`; `max_block = max m̃` (Table 1's "max|β|" read as `m̃`, **unconfirmed**, so `max_span`
  gives the longest book span too).
- Loose match (Eq. 1–2): the longest common contiguous run of whitespace-split words ÷ |T|, on the raw text (the
  paper does not say it normalises; ours: raw, with `loose_match_normalized` beside it).

Cost: difflib's search visits every pair of equal words, so its time grows with the product of the two lengths
(`bench/nv_recall.py`, Shakespeare against an edited copy, CPU seconds on one core of the project's 2-core machine:
23 s at 100,000 × 100,000 words, 92 s at 200,000, 268 s at 300,000; peak memory under 90 MB), hence `MAX_WORDS`.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from ..names import check_choice
from .normalize import words

#: Phase 1 succeeds when the loose match `s ≥ 0.6` [paper §3.1].
PHASE1_THRESHOLD = 0.6
#: The paper's passes: (τ_gap, τ_align, l) for each [paper §4.1].
PAPER_PASSES: tuple[tuple[int, int, int], ...] = ((2, 1, 20), (10, 3, 100))
#: "autojunk_off" (ours, the default) or "difflib_default" (Python's autojunk=True).
MODES = ("autojunk_off", "difflib_default")
#: Most words accepted for the book and for the generation, each (≈ 4.5 CPU-minutes at 300,000 × 300,000).
MAX_WORDS = 300_000

Part = tuple[int, int, int]  # (i, j, m): B[i:i+m] == G[j:j+m]


@dataclass(frozen=True)
class Block:
    """One near-verbatim block: verbatim runs merged across small, aligned gaps."""

    i: int  #: first book word (index into B)
    j: int  #: first generation word (index into G)
    m: int  #: m̃, the verbatim words of its parts (gap words not counted)
    span_book: tuple[int, int]  #: [start, end) in B, gaps included
    span_generation: tuple[int, int]  #: [start, end) in G, gaps included
    parts: tuple[Part, ...]  #: the matching blocks it merges, in order


@dataclass(frozen=True)
class NvRecall:
    """The final blocks of one generation against one book, and the paper's figures from them."""

    blocks: tuple[Block, ...]  #: final blocks, in book (and generation) order
    m: int  #: Σ m̃ over the final blocks (Eq. 6)
    missing: int  #: |B| − m (Eq. 8)
    additional: int  #: |G| − m (Eq. 8)
    max_block: int  #: the largest m̃ (0 without blocks)
    max_span: int  #: the longest book span of a final block, gaps included (0 without blocks)
    n_book: int  #: |B|
    n_generation: int  #: |G|
    nv_recall: float  #: m / |B|, a fraction in [0, 1] (Eq. 7)
    mode: str  #: "autojunk_off" or "difflib_default"
    passes: tuple[tuple[int, int, int], ...]  #: (τ_gap, τ_align, l) of each pass


def longest_common_run(target_words: Sequence[str], response_words: Sequence[str]) -> int:
    """Length of the longest common contiguous run of words (Eq. 1); 0 when either side is empty."""
    if not target_words or not response_words:
        return 0
    matcher = SequenceMatcher(None, target_words, response_words, autojunk=False)
    return matcher.find_longest_match(0, len(target_words), 0, len(response_words)).size


def loose_match(target: str, response: str) -> float:
    """Phase 1's `s(T, R) = longest(T, R) / |T|` on raw whitespace-split words (Eq. 2), in [0, 1].

    Examples
    --------
    >>> loose_match("a b c d", "x b c d y")
    0.75
    """
    target_words = target.split()
    if not target_words:
        raise ValueError("the Phase 1 target has no words")
    return longest_common_run(target_words, response.split()) / len(target_words)


def loose_match_normalized(target: str, response: str) -> float:
    """`loose_match` after §C.3 normalisation of both texts (ours, reported beside the raw `s`)."""
    target_words = words(target)
    if not target_words:
        raise ValueError("the Phase 1 target has no words")
    return longest_common_run(target_words, words(response)) / len(target_words)


def check_passes(passes: Sequence[Sequence[int]]) -> tuple[tuple[int, int, int], ...]:
    """The passes as a tuple of int triples; ValueError unless each is (τ_gap ≥ 0, τ_align ≥ 0, l ≥ 1)."""
    out = tuple(tuple(int(x) for x in triple) for triple in passes)
    if not out or any(len(t) != 3 or t[0] < 0 or t[1] < 0 or t[2] < 1 for t in out):
        raise ValueError(f"passes must be one or more (τ_gap ≥ 0, τ_align ≥ 0, l ≥ 1) triples (got {passes!r})")
    return out  # type: ignore[return-value]


def check_size(what: str, n: int) -> None:
    """ValueError when a text has more words than the matcher is allowed to take."""
    if n > MAX_WORDS:
        raise ValueError(f"the {what} has {n:,} words after normalisation; nv_recall takes at most {MAX_WORDS:,}.")


def matching_blocks(book_words: Sequence[str], generation_words: Sequence[str], *, mode: str) -> list[Part]:
    """difflib's matching blocks (i, j, m) of B against G, without the final (len, len, 0) sentinel."""
    check_choice("nv_recall mode", mode, MODES)
    matcher = SequenceMatcher(None, book_words, generation_words, autojunk=mode == "difflib_default")
    return [tuple(block) for block in matcher.get_matching_blocks() if block.size]  # type: ignore[misc]


def merge(blocks: Sequence[Block], gap: int, align: int) -> list[Block]:
    """Eq. 4 left to right: join the next block to the current merged one when both gaps are small and aligned."""
    out: list[Block] = []
    for block in blocks:
        if out:
            current = out[-1]
            gap_book = block.span_book[0] - current.span_book[1]
            gap_generation = block.span_generation[0] - current.span_generation[1]
            if max(gap_book, gap_generation) <= gap and abs(gap_book - gap_generation) <= align:
                out[-1] = Block(current.i, current.j, current.m + block.m, (current.i, block.span_book[1]),
                                (current.j, block.span_generation[1]), current.parts + block.parts)
                continue
        out.append(block)
    return out


def nv_recall(book: str, generation: str, *, mode: str = "autojunk_off",
              passes: Sequence[Sequence[int]] = PAPER_PASSES) -> NvRecall:
    """Near-verbatim recall of `book` in `generation`: match, then merge and filter per pass (Alg. 1).

    Parameters
    ----------
    book, generation : str
        Raw texts; both are normalised (`normalize.words`). The book must have at least one word; each side at
        most `MAX_WORDS`.
    mode : {"autojunk_off", "difflib_default"}, default "autojunk_off"
    passes : sequence of (τ_gap, τ_align, l), default the paper's ((2, 1, 20), (10, 3, 100))

    Examples
    --------
    >>> r = nv_recall("a b c d e f", "a b c x e f", passes=((1, 0, 2),))
    >>> (r.m, r.missing, r.additional, r.blocks[0].span_book)
    (5, 1, 1, (0, 6))
    """
    passes = check_passes(passes)
    book_words, generation_words = words(book), words(generation)
    if not book_words:
        raise ValueError("the book has no words after normalisation")
    check_size("book", len(book_words))
    check_size("generation", len(generation_words))
    blocks = [Block(i, j, m, (i, i + m), (j, j + m), ((i, j, m),))
              for i, j, m in matching_blocks(book_words, generation_words, mode=mode)]
    for gap, align, least in passes:
        blocks = [block for block in merge(blocks, gap, align) if block.m >= least]
    m = sum(block.m for block in blocks)
    return NvRecall(tuple(blocks), m, len(book_words) - m, len(generation_words) - m,
                    max((block.m for block in blocks), default=0),
                    max((block.span_book[1] - block.span_book[0] for block in blocks), default=0),
                    len(book_words), len(generation_words), m / len(book_words), mode, passes)


def nv_recall_union(book: str, results: Sequence[NvRecall]) -> float:
    """Share of the book's words covered by the verbatim parts of any run's final blocks (the paper's union)."""
    n_book = len(words(book))
    if any(result.n_book != n_book for result in results):
        raise ValueError(f"every result must be of this book ({n_book:,} words); got {[r.n_book for r in results]}")
    covered = bytearray(n_book)
    for result in results:
        for block in result.blocks:
            for i, _, m in block.parts:
                covered[i : i + m] = b"\x01" * m
    return sum(covered) / n_book if n_book else 0.0


def diff_segments(book: str, generation: str, result: NvRecall) -> list[tuple[str, str]]:
    """The texts as a diff: ("verbatim" | "missing" | "additional", normalised words), in book and generation order.

    Walking the final blocks' parts in order, the book words before each part are "missing" and the generation
    words before it "additional" (gaps inside a merged block included: m̃ does not count them). So the "verbatim"
    and "missing" segments joined give the normalised book, and "verbatim" and "additional" the generation.
    """
    book_words, generation_words = words(book), words(generation)
    if (len(book_words), len(generation_words)) != (result.n_book, result.n_generation):
        raise ValueError("the result is not of this book and generation (word counts differ)")
    segments: list[tuple[str, str]] = []

    def add(kind: str, chunk: Sequence[str]) -> None:
        if chunk:
            segments.append((kind, " ".join(chunk)))

    at_book = at_generation = 0
    for i, j, m in (part for block in result.blocks for part in block.parts):
        add("missing", book_words[at_book:i])
        add("additional", generation_words[at_generation:j])
        add("verbatim", book_words[i : i + m])
        at_book, at_generation = i + m, j + m
    add("missing", book_words[at_book:])
    add("additional", generation_words[at_generation:])
    return segments

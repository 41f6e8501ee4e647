"""Per-book extraction figures: shares with intervals on non-overlapping blocks, passages, quotes and findings,
against hand-built windows and a Wilson interval computed from its formula."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mia_core.audit.extraction import book_row, finding, independent_blocks, quote, share_interval, shares
from mia_core.extract import ExtractionResult, ExtractionSettings
from mia_core.extract.result import window_table


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def hand_result(log10_pz: list[float], greedy: list[bool], stride: int = 10, suffix: int = 50) -> ExtractionResult:
    """Windows every 10 characters of a 600-character text, suffixes 50 characters long."""
    n = len(log10_pz)
    starts = np.arange(n) * stride
    spans = {"token_start": starts, "char_start": starts, "suffix_char_start": starts + 50, "char_end": starts + 100}
    settings = ExtractionSettings(prefix=50, suffix=suffix, stride=stride)
    text = "".join(chr(ord("a") + i % 26) for i in range(600))
    return ExtractionResult(text, settings, window_table(spans, settings, np.array(log10_pz), np.array(greedy)), 600)


def test_blocks_count_non_overlapping_suffixes():
    assert independent_blocks(0, 10, 50) == 0
    assert independent_blocks(50, 10, 50) == 10  # 50 windows 10 tokens apart span 10 blocks of 50
    assert independent_blocks(51, 10, 50) == 11
    assert independent_blocks(3, 10, 50) == 1
    assert independent_blocks(7, 50, 50) == 7 and independent_blocks(7, 80, 50) == 7  # no overlap: every window


def test_interval_is_wilson_at_the_block_count():
    assert share_interval(0.3, 10) == pytest.approx(wilson(3, 10), abs=1e-12)
    assert share_interval(0.0, 20) == pytest.approx(wilson(0, 20), abs=1e-12)
    assert all(math.isnan(v) for v in share_interval(float("nan"), 0))


def test_book_row_by_hand():
    log10 = [-5.0, -1.5, -0.1, -0.2, -math.inf, -0.25, -3.0, -0.01, -0.9, -2.0]
    greedy = [False, False, True, False, False, False, False, True, False, False]
    result = hand_result(log10, greedy)
    row = book_row("Book", result)
    assert row["extraction_windows"] == 10
    assert row["share_pz_ge_0.5"] == 0.4  # -0.1, -0.2, -0.25, -0.01 are ≥ log10 0.5 = -0.301
    assert row["share_pz_ge_0.01"] == 0.7 and row["share_pz_ge_0.001"] == 0.8 and row["share_greedy"] == 0.2
    assert row["share_pz_ge_0.5_ci"] == pytest.approx(wilson(1, 2), abs=1e-12)  # 10 windows 10 apart: 2 blocks
    # suffixes of windows 2, 3, 5, 7: 70–120, 80–130, 100–150, 120–170: one passage 70–170
    assert row["passages"] == 1 and row["passage_chars"] == 100
    assert row["longest_passage_chars"] == 100 and row["longest_passage_log10_pz"] == -0.25
    assert row["longest_passage"] == result.text[70:170]
    assert row["max_log10_pz"] == -0.01
    assert "1 passage(s) totalling 100 characters" in finding(row) and "not a statistical inference" in finding(row)
    assert [r["threshold"] for r in shares(result)] == ["p_z ≥ 0.001", "p_z ≥ 0.01", "p_z ≥ 0.1", "p_z ≥ 0.5", "greedy"]


def test_findings_without_passages_or_windows():
    none = book_row("B", hand_result([-3.0, -math.inf], [False, False]))
    assert "highest p_z 10^-3.0" in finding(none) and "does not show it was not trained on it" in finding(none)
    zero = book_row("B", hand_result([-math.inf], [False]))
    assert "outside the top k" in finding(zero)
    empty = book_row("B", hand_result([], []))
    assert finding(empty).startswith("No extraction windows") and math.isnan(empty["share_pz_ge_0.5"])


def test_quote_flattens_whitespace_and_cuts():
    assert quote("a\n\n b\t c") == "a b c"
    long = quote("word " * 200, limit=50)
    assert len(long) == 50 and long.endswith("…")

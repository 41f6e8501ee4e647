"""Extraction evidence per book: the share of windows at each p_z threshold with an interval, passages, the longest one.

A fact about the model, kept apart from the membership verdict: "N passages totalling C characters are extractable
with probability ≥ 0.5" can be checked by sampling; it is not a statistical inference about training data.
Intervals treat overlapping windows honestly: windows every `stride` tokens share suffix tokens, so the sample size
of a share is the number of non-overlapping suffix blocks the windows span (n_windows × stride / suffix, when the
stride is shorter than the suffix), not the number of windows (Wilson interval at that size).
"""
from __future__ import annotations

import math

import pandas as pd
from scipy.stats import binomtest

from ..extract.result import THRESHOLDS, ExtractionResult

#: Characters of a book's longest extractable passage quoted in tables and reports (the rest is elided).
QUOTE_CHARS = 400


def independent_blocks(n_windows: int, stride: int, suffix: int) -> int:
    """Non-overlapping suffix blocks that `n_windows` windows every `stride` tokens span (at least 1 when any)."""
    if n_windows == 0:
        return 0
    return max(1, math.ceil(n_windows * min(1.0, stride / suffix)))


def share_interval(share: float, blocks: int, ci: float = 0.95) -> tuple[float, float]:
    """Wilson interval of a share of windows, with the independent blocks as the sample size (nan without windows)."""
    if blocks == 0 or math.isnan(share):
        return float("nan"), float("nan")
    found = binomtest(round(share * blocks), blocks).proportion_ci(confidence_level=ci, method="wilson")
    return float(found.low), float(found.high)


def shares(result: ExtractionResult, ci: float = 0.95) -> list[dict]:
    """One row per threshold (and greedy): the share of windows, its interval, and the blocks it rests on."""
    s = result.settings
    blocks = independent_blocks(result.n_windows, s.stride, s.suffix)
    rows = [(f"p_z ≥ {t:g}", result.share_at(t)) for t in THRESHOLDS] + [("greedy", result.greedy_share())]
    out = []
    for name, value in rows:
        low, high = share_interval(value, blocks, ci)
        out.append({"threshold": name, "share": value, "ci_low": low, "ci_high": high, "blocks": blocks})
    return out


def book_row(book: str, result: ExtractionResult, ci: float = 0.95) -> dict:
    """A book's extraction figures as one row of the books table (`EXTRACTION_COLUMNS`)."""
    row: dict = {"book": book, "extraction_windows": result.n_windows}
    for found in shares(result, ci):
        key = "greedy" if found["threshold"] == "greedy" else found["threshold"].replace("p_z ≥ ", "pz_ge_")
        row[f"share_{key}"] = found["share"]
        row[f"share_{key}_ci"] = (found["ci_low"], found["ci_high"])
    passages = result.passages()
    longest = result.longest_passage()
    row["passages"] = len(passages)
    row["passage_chars"] = sum(p.chars for p in passages)
    row["max_log10_pz"] = float(result.windows["log10_pz"].max()) if result.n_windows else float("nan")
    row["longest_passage_chars"] = longest.chars if longest else 0
    row["longest_passage_log10_pz"] = longest.min_log10_pz if longest else float("nan")
    row["longest_passage"] = quote(result.text[longest.start : longest.end]) if longest else ""
    return row


def quote(passage: str, limit: int = QUOTE_CHARS) -> str:
    """A passage as quoted in a table: whitespace runs as one space, cut at `limit` characters with an ellipsis."""
    flat = " ".join(passage.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def books_table(results: dict[str, ExtractionResult], ci: float = 0.95) -> pd.DataFrame:
    """Every book's `book_row`, in the order given."""
    return pd.DataFrame([book_row(book, result, ci) for book, result in results.items()])


def finding(row: dict) -> str:
    """One sentence of a book's extraction evidence, saying what kind of statement it is."""
    if not row["extraction_windows"]:
        return "No extraction windows: the book is shorter than one window."
    share = row["share_pz_ge_0.5"]
    if row["passages"]:
        return (f"{row['passages']} passage(s) totalling {row['passage_chars']:,} characters are extractable with "
                f"probability ≥ 0.5 ({share:.1%} of {row['extraction_windows']:,} windows). This is a fact about the "
                "model, checked by sampling, not a statistical inference about its training data.")
    best = row["max_log10_pz"]
    highest = f"highest p_z 10^{best:.1f}" if math.isfinite(best) else "every window has a suffix token outside the top k"
    return (f"No window is extractable with probability ≥ 0.5 ({highest}, over "
            f"{row['extraction_windows']:,} windows); the model does not reproduce this text verbatim under the "
            "sampling scheme tested, which does not show it was not trained on it.")

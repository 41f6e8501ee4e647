"""Extraction evidence per book: the share of windows at each p_z threshold with an interval, passages, the longest one.

A fact about the model, kept apart from the membership verdict: "N passages totalling C characters are extractable
with probability ≥ 0.5" can be checked by sampling; it is not a statistical inference about training data.
Intervals treat overlapping windows honestly: windows every `stride` tokens share suffix tokens, so the sample size
of a share is the number of non-overlapping suffix blocks the windows span (n_windows × stride / suffix, when the
stride is shorter than the suffix), not the number of windows (Wilson interval at that size).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from ..extract import ExtractionSettings, extract_texts
from ..extract.result import THRESHOLDS, ExtractionResult
from ..model.language_model import LanguageModel

#: Characters of a book's longest extractable passage quoted in tables and reports (the rest is elided).
QUOTE_CHARS = 400
#: Stretches of a book in its strip (the paper's figures: max p_z along the book).
STRIP_BINS = 200
#: Roles of the books an extraction pass covers, in report order.
ROLES = ("audited", "calibration member", "calibration non-member")


@dataclass
class ExtractionEvidence:
    """What an audit's extraction pass found: one row per book (`book_row` plus `role`), and each book's strip
    (`STRIP_BINS` maxima of log10 p_z along it, −inf where no window reaches)."""

    settings: ExtractionSettings
    table: pd.DataFrame
    strips: dict[str, np.ndarray] = field(default_factory=dict)


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
    longest = max(passages, key=lambda p: p.chars, default=None)  # the same as result.longest_passage(), found once
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


def strip(result: ExtractionResult, bins: int = STRIP_BINS) -> np.ndarray:
    """The highest log10 p_z in each of `bins` equal stretches of the text's characters (−inf: none reached)."""
    chars = result.char_max_log10_pz()
    out = np.full(bins, -np.inf)
    if len(chars):
        edges = np.linspace(0, len(chars), bins + 1).astype(np.int64)
        for i in range(bins):
            if edges[i + 1] > edges[i]:
                out[i] = chars[edges[i] : edges[i + 1]].max()
    return out


def extraction_evidence(lm: LanguageModel, books: Iterable[tuple[str, str, str]], settings: ExtractionSettings, *,
                        ci: float = 0.95, progress: Callable[[int, int], None] | None = None) -> ExtractionEvidence:
    """Extraction over each (name, role, text) book, one book at a time (its windows, then only its row and strip are
    kept); results are cached per book, so a run stopped midway redoes only the books not finished."""
    rows, strips = [], {}
    for name, role, text in books:
        result = extract_texts(lm, [text], settings, progress=progress)[0]
        rows.append({**book_row(name, result, ci), "role": role})
        strips[name] = strip(result)
    return ExtractionEvidence(settings, pd.DataFrame(rows), strips)


def csv_frame(evidence: ExtractionEvidence) -> pd.DataFrame:
    """extraction.csv: one row per book, each interval as two columns (…_ci_low, …_ci_high)."""
    table = evidence.table.copy()
    for column in [c for c in table.columns if c.endswith("_ci")]:
        table[column + "_low"] = [v[0] for v in table[column]]
        table[column + "_high"] = [v[1] for v in table[column]]
        table = table.drop(columns=column)
    first = ["book", "role", "extraction_windows"]
    return table[first + [c for c in table.columns if c not in first]]

"""Explore's per-token CSV: the statistics and every shown method's token scores, one row per token.

A plain function of `TokenStats` and `Score`s, so a script can write the same file as the page (the standalone
heatmap HTML, Explore's other download, is `heatmap.document`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .csv_safe import to_csv_safe
from .api import Score, TokenStats
from .stamp import ResultStamp

#: Columns of the per-token CSV that say what it was computed for, when a stamp is given (then `setting_<name>`).
ABOUT_COLUMNS = ("model", "model_fingerprint", "text_sha256", "bos")
#: Columns of the per-token CSV before the methods' own (`<method>_score`, `<method>_selected`).
TOKEN_COLUMNS = ("position", "token", "char_start", "char_end", "logprob", "mu", "sigma", "rank", "top1_token",
                 "top1_logprob")


def token_table(stats: TokenStats, scores: dict[str, Score], decode: Callable[[int], str] | None = None,
                stamp: ResultStamp | None = None) -> pd.DataFrame:
    """One row per scored token: its text and offsets, the statistics, and each method's token score and selection;
    with `stamp`, first the model, its fingerprint, the text's SHA-256, the BOS policy and the settings (k, …) the
    numbers were computed for (`ABOUT_COLUMNS`, then one column per setting), so the file says where it came from."""
    top1 = [decode(int(i)) if decode else str(int(i)) for i in stats.top1_id]
    table = pd.DataFrame({
        "position": np.arange(stats.n_scored), "token": list(stats.tokens),
        "char_start": stats.offsets[:, 0].astype(int), "char_end": stats.offsets[:, 1].astype(int),
        "logprob": stats.logprob.astype(np.float64), "mu": stats.mu.astype(np.float64),
        "sigma": stats.sigma.astype(np.float64), "rank": stats.rank.astype(int), "top1_token": top1,
        "top1_logprob": stats.top1_logprob.astype(np.float64)})
    for method, score in scores.items():
        values = np.asarray(score.token_scores, dtype=np.float64)
        if values.shape != (stats.n_scored,):
            raise ValueError(f"{method}: {values.shape[0]} token scores for {stats.n_scored} tokens")
        table[f"{method}_score"] = values
        table[f"{method}_selected"] = np.asarray(score.selected, dtype=bool)
    if stamp is None:
        return table
    about = {"model": stamp.model, "model_fingerprint": stamp.fingerprint, "text_sha256": stamp.text_sha256,
             "bos": stamp.bos} | {f"setting_{name}": value for name, value in stamp.settings}
    return pd.concat([pd.DataFrame(about, index=table.index), table], axis=1)


def token_csv(stats: TokenStats, scores: dict[str, Score], decode: Callable[[int], str] | None = None,
              stamp: ResultStamp | None = None) -> str:
    """`token_table` as CSV text, cells that a spreadsheet would run as formulas neutralised (`csv_safe`)."""
    return to_csv_safe(token_table(stats, scores, decode, stamp))

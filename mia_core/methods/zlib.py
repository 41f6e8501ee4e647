"""Zlib calibration (Carlini et al. 2021): −loss divided by the text's zlib-compressed length."""
from __future__ import annotations

import zlib as _zlib

import numpy as np

from ..api import (
    LOGP, LOGP_RANGE, AccessNeeds, NoParams, Paper, Score, StatsBatch, TokenStats, TokenView, batch_mean, register,
    require_tokens,
)


def zlib_bytes(text: str) -> int:
    """Length of the UTF-8 text compressed by zlib at its default level."""
    return len(_zlib.compress(text.encode("utf-8")))


def zlib_batch(batch: StatsBatch, params: NoParams) -> np.ndarray:
    """`zlib_ratio` of every text of a batch: each row's mean log p over its scored text's compressed size (zlib
    itself runs per text: it is the method's definition)."""
    sizes = np.fromiter((zlib_bytes(st.scored_text) for st in batch.stats), np.float64, len(batch.stats))
    return batch_mean(batch.logprob, batch.valid) / sizes


@register("zlib", access=AccessNeeds(),
          lesson=120, paper=Paper("Carlini, Tramèr, Wallace et al.", 2021, "https://arxiv.org/abs/2012.07805",
                                  "Extracting Training Data from Large Language Models", "USENIX Security 2021"),
          fails=("Compression only discounts generic repetitiveness; it cannot tell a rare text the model saw from a "
                 "rare one it did not. On MIMIR it does no better than the loss (mean AUROC 52.3–54.8 on Pythia "
                 "160M–12B, Min-K%++ paper, Table 2)."),
          view=TokenView(LOGP,
                         "every token: the score is their mean log p over the text's zlib-compressed size",
                         token_range=LOGP_RANGE),
          label="Zlib ratio",
          reading=lambda v: f"log-probability per token divided by the compressed size: {v:.5f}; it discounts texts "
                            "that are simply repetitive or predictable.",
          formula=r"\mathrm{score}(x) = \frac{\frac{1}{n}\sum_t \log p(x_t \mid x_{<t})}{\mathrm{zlib}(x)}",
          idea="Divides out how compressible (generically predictable) the text is.",
          summary="−loss divided by the zlib-compressed size: discounts texts that are simply predictable.",
          batch=zlib_batch)
def zlib_ratio(stats: TokenStats, params: NoParams) -> Score:
    """`mean(logprob) / zlib_bytes(text)`; token scores are the log-probs, all selected.

    For a truncated text both terms cover the same kept prefix (`TokenStats.scored_text`).
    """
    require_tokens(stats)
    logprob = stats.logprob.astype(np.float64)
    value = float(np.mean(logprob) / zlib_bytes(stats.scored_text))
    return Score(value, logprob, np.ones(stats.n_scored, bool))

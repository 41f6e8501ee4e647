"""Unlearning audit (Shi et al. 2024, "Detecting Pretraining Data from Large Language Models", §7.2.1).

The authors chunk Harry Potter books 1–4 into 512-word chunks, compute Min-K% Prob for each chunk
under the original model (LLaMA2-7B-chat) and the "unlearned" one (LLaMA2-7B-WhoIsHarryPotter),
and call a chunk an "unlearning may have failed" suspect when the ratio of its two scores lies in
(1/1.15, 1.15): the unlearned model still finds the chunk about as likely as the original did.

Choices the paper leaves open, made here:
- **Chunks** are consecutive runs of `chunk_words` whitespace-separated words (default 512, as the
  paper), cut from the original text so line breaks inside a chunk are kept. A text's last chunk
  may be shorter (its `n_words` is in the table): unlike book snippets scored against a calibrated
  threshold (`snippets.py` drops short tails), a ratio compares one chunk with itself.
- **Ratio** = score_unlearned / score_original of the chosen method. Min-K% values are means of
  log-probs, hence negative; the reference code reports their negation (positive). The ratio is
  the same either way ((−a)/(−b) = a/b), and the band is symmetric under inversion, so which model
  is the numerator does not change the suspect set. A ratio is only a similarity measure when both
  scores have one fixed sign, as `min_k`, `loss` and `zlib` do (always < 0); a method whose scores
  cross zero (`min_k_pp`) gives negative ratios (never suspects) and unstable ratios near zero.
- **Ranking**: the paper only filters. We rank every chunk by |ln ratio| ascending (most similar
  under both models first); suspects are exactly the chunks with |ln ratio| < ln(band), so they
  take ranks 1..n_suspects. Non-positive or undefined ratios rank last.
- **Tokenizers**: each model scores the chunks with its own tokenizer (`score_texts`, batched);
  chunks longer than a model's context are scored in sliding windows, so both scores cover the
  whole chunk.

A suspect is a lead, not a finding: a chunk neither model ever knew also scores alike under both.
The paper follows suspects up with story-completion and question-answering probes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..methods import get_method
from ..api import KParams
from ..scoring import score_texts
from .snippets import word_chunks

COLUMNS = ["rank", "chunk_id", "source", "chunk", "n_words", "char_start", "char_end", "text",
           "score_original", "score_unlearned", "ratio", "abs_log_ratio", "suspect"]


@dataclass(frozen=True)
class UnlearningParams:
    """Settings of the audit; the defaults are the paper's."""

    chunk_words: int = 512
    """Words per chunk (the paper: 512)."""
    method: str = "min_k"
    """A stats-only method (the paper: Min-K% Prob)."""
    k: float = 0.2
    """k of Min-K% (the paper's default 20%)."""
    band: float = 1.15
    """Suspect when the score ratio lies in (1/band, band) (the paper: 1.15)."""
    bos: str = "auto"
    """BOS policy of both models' statistics."""

    def __post_init__(self) -> None:
        if self.chunk_words < 1:
            raise ValueError(f"chunk_words must be at least 1 (got {self.chunk_words})")
        if not self.band > 1:
            raise ValueError(f"band must be greater than 1 (got {self.band})")
        KParams(self.k)  # k validated where every method's k is
        spec = get_method(self.method)
        if not spec.stats_only:
            raise ValueError(f"method {self.method!r} needs {'+'.join(spec.needs)}; "
                             "the unlearning audit takes a method that needs only the model's statistics")


def make_chunks(texts: Sequence[str], *, chunk_words: int = 512, sources: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per chunk: chunk_id ("source#i"), source, chunk (index within its text), n_words, char span, text."""
    sources = [str(i + 1) for i in range(len(texts))] if sources is None else [str(s) for s in sources]
    if len(sources) != len(texts):
        raise ValueError(f"{len(sources)} sources for {len(texts)} texts")
    rows = [{"chunk_id": f"{source}#{i}", "source": source, "chunk": i, "n_words": n, "char_start": a,
             "char_end": b, "text": text[a:b]}
            for text, source in zip(texts, sources) for i, (a, b, n) in enumerate(word_chunks(text, chunk_words))]
    if not rows:
        raise ValueError("no words to audit: every text is empty")
    return pd.DataFrame(rows, columns=["chunk_id", "source", "chunk", "n_words", "char_start", "char_end", "text"])


def ratio_table(chunks: pd.DataFrame, score_original, score_unlearned, *, band: float = 1.15) -> pd.DataFrame:
    """Add both scores, ratio = unlearned/original, |ln ratio|, suspect and rank; sorted by rank.

    >>> table = ratio_table(pd.DataFrame({"chunk_id": ["a", "b"]}), [-2.0, -2.0], [-3.0, -2.2])
    >>> table[["chunk_id", "ratio", "suspect"]].values.tolist()
    [['b', 1.1, True], ['a', 1.5, False]]
    """
    if not band > 1:
        raise ValueError(f"band must be greater than 1 (got {band})")
    original = np.asarray(score_original, dtype=np.float64)
    unlearned = np.asarray(score_unlearned, dtype=np.float64)
    if original.shape != (len(chunks),) or unlearned.shape != (len(chunks),):
        raise ValueError(f"need one score per chunk under each model ({len(chunks)} chunks)")
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = unlearned / original
        distance = np.where(ratio > 0, np.abs(np.log(ratio)), np.inf)  # inf: sign change, 0/0, x/0
    distance = np.where(np.isfinite(distance), distance, np.inf)
    table = chunks.copy()
    table["score_original"], table["score_unlearned"] = original, unlearned
    table["ratio"], table["abs_log_ratio"] = ratio, distance
    table["suspect"] = distance < math.log(band)
    order = np.argsort(distance, kind="stable")
    table = table.iloc[order].reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table[[c for c in COLUMNS if c in table.columns] + [c for c in table.columns if c not in COLUMNS]]


def audit_unlearning(
    original,
    unlearned,
    texts: Sequence[str],
    *,
    sources: Sequence[str] | None = None,
    params: UnlearningParams = UnlearningParams(),
    progress: Callable[[int, int], None] | None = None,
    method_params: dict | None = None,
) -> pd.DataFrame:
    """Chunk `texts`, score each chunk under both models, flag and rank the suspects.

    original, unlearned : `LanguageModel`s; each scores with its own tokenizer.
    sources : a name per text (default "1", "2", …), used in `chunk_id`.
    progress : progress(done, total) in thousandths: the original model's pass fills the first half.
    method_params : further parameters of the method (k comes from `params`).

    Returns one row per chunk, sorted by rank (suspects first): rank, chunk_id, source, chunk,
    n_words, char_start, char_end, text, score_original, score_unlearned, ratio, abs_log_ratio, suspect.
    """
    chunks = make_chunks(texts, chunk_words=params.chunk_words, sources=sources)
    chunk_texts = chunks["text"].tolist()
    scores = []
    for phase, lm in enumerate((original, unlearned)):
        step = None if progress is None else _half(progress, phase)
        frame = score_texts(lm, chunk_texts, [params.method], k=params.k, bos=params.bos, progress=step,
                            **dict(method_params or {}))
        scores.append(frame[params.method].to_numpy())
    if progress is not None:
        progress(1000, 1000)
    return ratio_table(chunks, scores[0], scores[1], band=params.band)


def _half(progress: Callable[[int, int], None], phase: int) -> Callable[[int, int], None]:
    """Map one model's progress(done, total) onto half of a 0..1000 scale."""
    return lambda done, total: progress(500 * phase + int(500 * done / max(total, 1)), 1000)

"""Explore's per-token CSV (`mia_core.token_export`) against the statistics it came from, and result stamps
(`mia_core.stamp`); the standalone heatmap page is tested with the heatmaps (`tests/test_heatmap.py`)."""
from __future__ import annotations

import hashlib
import io

import numpy as np
import pandas as pd
import pytest

from mia_core import score
from mia_core.stamp import stamp_for
from mia_core.token_export import TOKEN_COLUMNS, token_csv, token_table

HOSTILE = 'Hi <script>alert("x")</script> =SUM(A1) & -5 bye'


def test_token_csv_columns_and_values_match_the_statistics(llama_lm):
    stats = llama_lm.token_stats([HOSTILE], cache=False)[0]
    scores = {"min_k": score("min_k", stats, k=0.2), "min_k_pp": score("min_k_pp", stats, k=0.5)}
    decode = llama_lm.tokenizer.decode
    read = pd.read_csv(io.StringIO(token_csv(stats, scores, decode)), keep_default_na=False)
    assert list(read.columns) == [*TOKEN_COLUMNS, "min_k_score", "min_k_selected", "min_k_pp_score",
                                  "min_k_pp_selected"]
    assert len(read) == stats.n_scored
    np.testing.assert_allclose(read["logprob"], stats.logprob, rtol=1e-6)
    np.testing.assert_allclose(read["mu"], stats.mu, rtol=1e-6)
    np.testing.assert_allclose(read["sigma"], stats.sigma, rtol=1e-6)
    assert read["rank"].tolist() == stats.rank.tolist()
    assert read["char_start"].tolist() == stats.offsets[:, 0].tolist()
    # z by hand from the statistics, not from the method: (log p − μ) / σ
    np.testing.assert_allclose(read["min_k_pp_score"], (stats.logprob - stats.mu) / stats.sigma, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(read["min_k_score"], stats.logprob, rtol=1e-6)
    n_sel = max(1, int(stats.n_scored * 0.2))  # min-k: the floor(k·n) lowest log p
    assert read["min_k_selected"].sum() == n_sel
    assert set(read.loc[read["min_k_selected"], "position"]) == set(np.argsort(stats.logprob, kind="stable")[:n_sel])
    def safe(cell: str) -> str:  # formula-starting cells get a leading ' (spreadsheet safety)
        return "'" + cell if cell.startswith(("=", "+", "-", "@", "\t", "\r")) else cell

    assert read["token"].tolist() == [safe(t) for t in stats.tokens]
    assert any(t.startswith("'") for t in read["token"])  # the text's "=SUM" / "-5" tokens were neutralised
    assert read["top1_token"].tolist() == [safe(decode(int(i))) for i in stats.top1_id]


def test_token_table_refuses_token_scores_of_another_length(llama_lm):
    stats = llama_lm.token_stats(["a short text"], cache=False)[0]
    bad = score("loss", stats)
    bad = type(bad)(bad.value, bad.token_scores[:-1], bad.selected[:-1])
    with pytest.raises(ValueError, match="token scores for"):
        token_table(stats, {"loss": bad})


def test_stamp_says_what_changed():
    stamp = stamp_for("demo", "abc", "The cat sat on the mat and more words follow here", "auto", k=0.25)
    assert stamp.text_preview == "The cat sat on the mat and more …"
    assert stamp.settings == (("k", "0.25"),)
    assert stamp.changed("demo", "The cat sat on the mat and more words follow here", "auto") == []
    assert stamp.changed("demo-known", "Another text", "none") == ["the model", "the text", "the BOS policy"]
    assert stamp.short_hash == hashlib.sha256(b"The cat sat on the mat and more words follow here").hexdigest()[:8]


def test_token_csv_says_which_model_text_and_settings_its_numbers_belong_to(llama_lm):
    text = "The owl and the pussy-cat went to sea"
    stats = llama_lm.token_stats([text], cache=False)[0]
    stamp = stamp_for("./models/my-llama", llama_lm.fingerprint, text, "auto", k=0.2)
    read = pd.read_csv(io.StringIO(token_csv(stats, {"min_k": score("min_k", stats, k=0.2)}, stamp=stamp)),
                       keep_default_na=False, dtype=str)
    assert list(read.columns[:5]) == ["model", "model_fingerprint", "text_sha256", "bos", "setting_k"]
    assert set(read["model"]) == {"./models/my-llama"} and set(read["model_fingerprint"]) == {llama_lm.fingerprint}
    assert set(read["text_sha256"]) == {hashlib.sha256(text.encode()).hexdigest()} and set(read["setting_k"]) == {"0.2"}
    assert list(read.columns[5:]) == [*TOKEN_COLUMNS, "min_k_score", "min_k_selected"] and len(read) == stats.n_scored

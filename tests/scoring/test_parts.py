"""Texts scored a part at a time (`score_parts`, issue 45, item 11) give the rows of one part: the same CSV bytes when
every text has its batch to itself, and errors numbered among all the texts; only methods that score a text from that
text alone are parted."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mia_core import LanguageModel
from mia_core.csv_safe import to_csv_safe
from mia_core.model import language_model
from mia_core.model.stats_cache import StatsCache
from mia_core.scoring import score_table
from mia_core.scoring.parts import can_part, score_parts

from tests.support.tiny import random_texts, tiny_llama

METHODS = ["loss", "zlib", "min_k", "min_k_pp", "surp", "gap_k", "tag_tab"]


def fresh_lm(tok, folder) -> LanguageModel:
    """The tests' tiny Llama with a cache of its own (cached statistics would hide a difference)."""
    return LanguageModel(tiny_llama(len(tok), seed=0, logits_width=320), tok, name="tiny",
                         stats_cache=StatsCache(folder))


def frame(texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"t{i}" for i in range(len(texts))], "text": texts})


def test_parts_of_seven_texts_write_the_bytes_of_one_part(tok, tmp_path, monkeypatch):
    monkeypatch.setattr(language_model, "CPU_BATCH_TOKENS", 1)  # one text a batch: no batch shape differs
    data = frame(random_texts(30, seed=21, min_words=2, max_words=30))
    whole = score_table(fresh_lm(tok, tmp_path / "a"), data["text"].tolist(), METHODS)
    whole.insert(0, "id", data["id"].to_numpy())
    parts = [data.iloc[i:i + 7] for i in range(0, len(data), 7)]
    done = []
    parted = score_parts(fresh_lm(tok, tmp_path / "b"), parts, METHODS, texts_done=done.append)
    assert to_csv_safe(parted) == to_csv_safe(whole) and sum(done) == len(data)


def test_batches_of_other_shapes_move_only_the_last_bits(tok, tmp_path):
    data = frame(random_texts(40, seed=22, min_words=2, max_words=50))
    whole = score_table(fresh_lm(tok, tmp_path / "a"), data["text"].tolist(), METHODS)
    parted = score_parts(fresh_lm(tok, tmp_path / "b"), [data.iloc[:13], data.iloc[13:]], METHODS)
    np.testing.assert_allclose(parted[METHODS].to_numpy(), whole[METHODS].to_numpy(), rtol=1e-5, atol=1e-4)
    assert parted["n_tokens"].tolist() == whole["n_tokens"].tolist()


@pytest.mark.filterwarnings("ignore:EM-MIA on")
def test_an_error_names_the_text_among_all_parts(tok, tmp_path):
    texts = random_texts(12, seed=23)
    texts[9] = ""
    with pytest.raises(ValueError, match=r"^text 9: no token to score"):
        score_parts(fresh_lm(tok, tmp_path / "a"), [frame(texts).iloc[:5], frame(texts).iloc[5:]], METHODS)
    with pytest.raises(ValueError, match=r"^text 9: "):  # a method scored after the pass, not streamed
        score_parts(fresh_lm(tok, tmp_path / "b"), [frame(texts).iloc[:5], frame(texts).iloc[5:]], ["em_mia"])


def test_only_methods_that_score_a_text_alone_are_parted():
    assert can_part(["loss", "zlib", "ref", "lowercase", "dc_pdd", "neighbor"])
    assert not can_part(["loss", "em_mia"]) and not can_part(["camia"])

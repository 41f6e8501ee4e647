"""Reference sets kept per model and setting (`mia_core.reference.cache`) and their progress (texts, elapsed, ETA)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mia_core import load_model, score_texts
from mia_core.reference import (
    TextsProgress, build_reference, cached_reference, duration_words, kept_reference, references_dir,
)
from mia_core.reference.progress import TextsClock

from tests.support.tiny import random_texts, save_tiny_model

ROOT = Path(__file__).resolve().parents[2]

#: A second process with the same cache: reads the kept set; scoring anything would raise.
SECOND_SESSION = """
import json, sys
from mia_core import LanguageModel, load_model
from mia_core.reference import cached_reference
from tests.support.tiny import random_texts

def no_scoring(*args, **kwargs):
    raise AssertionError("the second session scored texts")

lm = load_model(sys.argv[1])
LanguageModel.token_stats = no_scoring
events = []
ref = cached_reference(lm, random_texts(10, seed=3), ["loss", "min_k"], k=0.5, source="unit",
                       progress=lambda d, t: events.append(d), on_texts=lambda p: events.append(p.done))
print(json.dumps({"events": events, "loss": ref.table["loss"].tolist(), "created": ref.created}))
"""


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def model_dir(tmp_path) -> Path:
    return save_tiny_model(tmp_path / "tiny")


def test_the_clock_counts_texts_and_paces_the_eta_by_tokens():
    moments = iter([0.0, 10.0, 10.0, 20.0, 25.0, 25.0, 30.0])  # a batch reads the clock twice (pace, report)
    seen: list[TextsProgress] = []
    clock = TextsClock(4, seen.append, now=lambda: next(moments))  # starts at 0 s
    clock.tokens_fed(100, 400)  # 10 s: 100 of 400 tokens → 30 s left
    clock.text_ready()  # 20 s: 1 text; 10 s since the pace → 20 s left
    clock.tokens_fed(300, 400)  # 25 s: 300 of 400 in 25 s → 8.33 s left
    clock.text_ready()  # 30 s: 5 s since → 3.33 s left
    assert [(p.done, p.elapsed_s) for p in seen] == [(0, 10.0), (1, 20.0), (1, 25.0), (2, 30.0)]
    np.testing.assert_allclose([p.eta_s for p in seen], [30.0, 20.0, 25 / 3, 25 / 3 - 5])
    assert seen[1].words() == "1 of 4 texts, ETA 20 s"


def test_the_eta_is_unknown_before_the_first_batch_and_absent_once_done():
    assert TextsProgress(0, 120, 3.0, None).words() == "0 of 120 texts"
    assert TextsProgress(40, 120, 35.0, 70.0).words() == "40 of 120 texts, ETA 1 min 10 s"
    assert TextsProgress(120, 120, 99.0, 0.0).words() == "120 of 120 texts"
    assert [duration_words(s) for s in (0.4, 8, 70, 3600 + 5 * 60 + 29)] == ["0 s", "8 s", "1 min 10 s", "1 h 5 min"]


def test_building_reports_every_text_once_with_the_same_scores(llama_lm):
    texts = random_texts(9, seed=2)
    seen: list[TextsProgress] = []
    ref = build_reference(llama_lm, texts, ["loss", "min_k"], k=0.5, on_texts=seen.append)
    assert (seen[0].done, seen[0].total, seen[0].eta_s) == (0, 9, None)  # "0 of 9 texts" as the pass starts
    assert sorted({p.done for p in seen} - {0}) == list(range(1, len(texts) + 1))  # each text counted once
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert seen[-1].done == seen[-1].total == 9 and seen[-1].eta_s == 0.0
    expected = score_texts(llama_lm, texts, ["loss", "min_k"], k=0.5)
    np.testing.assert_allclose(ref.table[["loss", "min_k"]].to_numpy(), expected.to_numpy(), rtol=1e-12)
    assert ref.table["n_tokens"].tolist() == [s.n_scored for s in llama_lm.token_stats(texts)]


def test_a_kept_set_is_reused_by_a_second_process_without_scoring(cache, model_dir):
    lm = load_model(str(model_dir))
    texts = random_texts(10, seed=3)
    assert kept_reference(lm, texts, ["loss", "min_k"], k=0.5, source="unit") is None
    seen: list[TextsProgress] = []
    first = cached_reference(lm, texts, ["loss", "min_k"], k=0.5, source="unit", on_texts=seen.append)
    assert seen[-1].done == 10
    assert [p.parent for p in references_dir().glob("*/reference.json")] != []
    assert references_dir() == cache / "references"
    done = subprocess.run([sys.executable, "-c", SECOND_SESSION, str(model_dir)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "MIA_LENS_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    second = json.loads(done.stdout.strip().splitlines()[-1])
    assert second["events"] == []  # no progress: nothing scored
    assert second["created"] == first.created
    np.testing.assert_array_equal(second["loss"], first.table["loss"].to_numpy())
    direct = score_texts(lm, texts, ["loss"], k=0.5)["loss"].to_numpy()  # the kept scores are the model's own
    np.testing.assert_allclose(second["loss"], direct, rtol=1e-12)


def test_another_setting_or_text_is_another_set_and_a_damaged_one_is_scored_again(cache, llama_lm):
    texts = random_texts(6, seed=4)
    first = cached_reference(llama_lm, texts, ["min_k"], k=0.5)
    assert kept_reference(llama_lm, texts, ["min_k"], k=0.5).created == first.created
    assert kept_reference(llama_lm, texts, ["min_k"], k=0.3) is None
    assert kept_reference(llama_lm, texts, ["min_k"], k=0.5, bos="none") is None
    assert kept_reference(llama_lm, texts[:-1], ["min_k"], k=0.5) is None
    assert kept_reference(llama_lm, texts, ["min_k"], k=0.5, params={"a": 1}) is None
    (folder,) = references_dir().iterdir()
    (folder / "scores.csv").write_text("not,a\nreference\n")
    assert kept_reference(llama_lm, texts, ["min_k"], k=0.5) is None
    seen: list[TextsProgress] = []
    again = cached_reference(llama_lm, texts, ["min_k"], k=0.5, on_texts=seen.append)
    assert seen and again.table["min_k"].tolist() == first.table["min_k"].tolist()

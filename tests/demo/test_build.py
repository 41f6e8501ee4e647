"""The known-membership demo: seeded split, manifest, offline rebuild, and the training path."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tiny import tiny_llama, tiny_tokenizer

from mia_core import LanguageModel, load_model, metrics, score_texts
from mia_core.inputs.datasets import SplitSizes, load, make_split, manifest_path, rebuild_texts
from mia_core.demo.build import build_demo
from mia_core.model.lora import attach_adapter
from mia_core.demo.train import LoraSettings

SMALL = SplitSizes(wiki_buckets=(32,), wiki_per_bucket=6, books_per_class=2, calibration_books_per_class=1, book_words=60)


@pytest.fixture(scope="module")
def split():
    return make_split(0)


def test_split_is_disjoint_balanced_and_seeded(split):
    wiki = split["datasets"]["demo-wiki"]
    members = {e["id"] for e in wiki if e["label"] == 1}
    nonmembers = {e["id"] for e in wiki if e["label"] == 0}
    assert len(members) == len(nonmembers) == 240 and not members & nonmembers
    for bucket in (32, 64, 128):
        assert sum(e["label"] for e in wiki if e["bucket"] == bucket) == 80
        assert sum(1 - e["label"] for e in wiki if e["bucket"] == bucket) == 80
    books = split["datasets"]["demo-books"]
    assert sorted(b["label"] for b in books) == [0] * 6 + [1] * 6
    assert len({b["id"] for b in books}) == 12
    for label in (0, 1):
        assert sum(b["role"] == "calibration" for b in books if b["label"] == label) == 2
    assert make_split(0) == split and make_split(1) != split


def test_texts_rebuild_offline_and_match_hashes(split):
    wiki = rebuild_texts("demo-wiki", split)
    assert all(len(t.split()) == b for t, b in zip(wiki["text"], wiki["bucket"]))
    books = rebuild_texts("demo-books", split)
    assert all(len(t.split()) == 3000 for t in books["text"]) and set(books["role"]) == {"calibration", "audit"}
    tampered = json.loads(json.dumps(split))
    tampered["datasets"]["demo-wiki"][0]["sha256"] = "0" * 64
    with pytest.raises(ValueError, match="differs from the manifest"):
        rebuild_texts("demo-wiki", tampered)


def test_committed_manifest_is_the_seeded_split(split):
    committed = json.loads(manifest_path().read_text())
    assert committed == split
    assert (load("demo-wiki")["label"].to_numpy() == [e["label"] for e in split["datasets"]["demo-wiki"]]).all()
    with pytest.raises(KeyError, match="available"):
        load("wikimia")


def test_training_path_end_to_end_on_a_tiny_model(tmp_path):
    """`mia demo build`'s code path on a tiny model: split, LoRA training, saved assets, merge."""
    tok = tiny_tokenizer(300)
    base = LanguageModel(tiny_llama(len(tok), seed=0), tok, name="tiny")
    before = {k: v.clone() for k, v in base.model.state_dict().items()}
    record = build_demo(tmp_path, sizes=SMALL, base=base,
                        settings=LoraSettings(epochs=12, lr=2e-2, block_tokens=64, batch_size=4, warmup_steps=3))
    assert all(torch.equal(before[k], v) for k, v in base.model.state_dict().items())  # base left unchanged
    assert {p.name for p in tmp_path.iterdir()} == {"adapter_model.safetensors", "adapter_config.json", "manifest.json", "build.json"}
    assert record["loss_last_10"] < record["loss_first_10"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest == make_split(0, SMALL)
    tuned = attach_adapter(base, tmp_path, name="tiny-known")
    assert tuned.fingerprint != base.fingerprint
    wiki = rebuild_texts("demo-wiki", manifest)
    scores = score_texts(tuned, wiki["text"].tolist(), ["loss"])["loss"]
    assert metrics.auroc(wiki["label"], scores) >= 0.8  # the adapter learnt its members


@pytest.mark.integration
def test_demo_known_scores_members_higher():
    lm = load_model("demo-known")
    wiki = load("demo-wiki")
    sample = wiki.groupby("label").head(25)
    scores = score_texts(lm, sample["text"].tolist(), ["min_k_pp"])["min_k_pp"].to_numpy()
    labels = sample["label"].to_numpy()
    assert scores[labels == 1].mean() > scores[labels == 0].mean()
    assert metrics.auroc(labels, scores) >= 0.65

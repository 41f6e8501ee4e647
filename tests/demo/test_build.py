"""The known-membership demo model: the training path of `mia demo build`, and demo-known's membership signal.
Its data sets (seeded split, manifest, offline rebuild): tests/inputs/test_datasets.py."""
from __future__ import annotations

import json

import pytest
import torch

from mia_core import LanguageModel, load_model, metrics, score_texts
from mia_core.inputs.datasets import SplitSizes, load, make_split, rebuild_texts
from mia_core.demo.build import build_demo
from mia_core.model.lora import attach_adapter
from mia_core.demo.train import LoraSettings

from tests.support.tiny import tiny_llama, tiny_tokenizer

SMALL = SplitSizes(wiki_buckets=(32,), wiki_per_bucket=6, books_per_class=2, calibration_books_per_class=1, book_words=60)


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
    # EZ-MIA and WBC in their papers' setting: the fine-tuned target against the checkpoint it started from (the
    # demo-known model loads once here: it is most of this test's time)
    few = sample.groupby("label").head(8)
    paired = score_texts(lm, few["text"].tolist(), ["ez_mia", "wbc"], ref_model=load_model("demo"))
    for name in ("ez_mia", "wbc"):
        assert metrics.auroc(few["label"].to_numpy(), paired[name].to_numpy()) >= 0.75, name

"""demo-traps' trap passages: exact member substrings of known exposure, rebuilt and hash-checked, copied the right
number of times into the training texts, and `mia demo build --traps`'s code path on a tiny model."""
from __future__ import annotations

import json

import pytest

from mia_core import LanguageModel, ModelLoadError, load_model
from mia_core.demo import build as build_module
from mia_core.demo.build import build_demo, member_texts
from mia_core.demo.train import LoraSettings
from mia_core.demo.traps import EXPOSURES, TRAP_WORDS, choose_traps, extra_copies, load_traps, trap_passages
from mia_core.inputs.datasets import SplitSizes, make_split, rebuild_texts

from tests.support.tiny import tiny_llama, tiny_tokenizer

SMALL = SplitSizes(wiki_buckets=(128,), wiki_per_bucket=6, books_per_class=4, calibration_books_per_class=1,
                   book_words=200)


def test_traps_are_member_passages_of_each_exposure_and_held_out_controls():
    manifest = make_split(0, SMALL)
    traps = choose_traps(manifest, seed=0)
    assert choose_traps(manifest, seed=0) == traps  # seeded
    passages = trap_passages(traps, manifest)
    for source in ("demo-wiki", "demo-books"):
        rows = passages[passages["source"] == source]
        assert sorted(rows["exposure"]) == [0, *EXPOSURES]
        assert (rows["label"] == (rows["exposure"] > 0).astype(int)).all()  # held-out controls are non-members
        full = rebuild_texts(source, manifest).set_index("id")["text"]
        for row in rows.itertuples():
            assert full[row.id][row.char_start : row.char_end] == row.text and len(row.text.split()) == TRAP_WORDS
    copies = extra_copies(passages)
    for row in passages.itertuples():  # the member text holds one occurrence; the copies make up the rest
        assert copies.count(row.text) == max(0, row.exposure - 1)
        in_members = sum(text.count(row.text) for text in member_texts(manifest))
        assert in_members + copies.count(row.text) == row.exposure


def test_a_changed_source_text_is_refused():
    manifest = make_split(0, SMALL)
    traps = choose_traps(manifest, seed=0)
    traps[0] = {**traps[0], "char_end": traps[0]["char_end"] - 1}
    with pytest.raises(ValueError, match="differs from traps.json"):
        trap_passages(traps, manifest)


def test_build_with_traps_on_a_tiny_model(tmp_path, monkeypatch):
    tok = tiny_tokenizer(300)
    base = LanguageModel(tiny_llama(len(tok), seed=0), tok, name="tiny")
    seen = {}
    real = build_module.train_lora

    def spy(model, tokenizer, texts, settings, progress):
        seen["texts"] = list(texts)
        return real(model, tokenizer, texts, settings, progress)

    monkeypatch.setattr(build_module, "train_lora", spy)
    record = build_demo(tmp_path, sizes=SMALL, base=base, traps=True,
                        settings=LoraSettings(epochs=1, block_tokens=64, batch_size=16, warmup_steps=1))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    traps = load_traps(tmp_path)
    assert record["traps"] is True and traps == choose_traps(manifest, 0)
    assert seen["texts"] == member_texts(manifest) + extra_copies(trap_passages(traps, manifest))


def test_loading_demo_traps_before_it_is_built_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr("mia_core.model.backends.demo.demo_traps_dir", lambda: tmp_path / "absent")
    with pytest.raises(ModelLoadError, match=r"demo-traps is not built on this machine: build it with `mia demo build --traps`"):
        load_model("demo-traps")

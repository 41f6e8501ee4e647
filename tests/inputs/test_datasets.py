"""The known-membership demo sets: seeded split, manifest, offline rebuild of the texts."""
from __future__ import annotations

import json

import pytest

from mia_core.inputs.datasets import load, make_split, manifest_path, rebuild_texts


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

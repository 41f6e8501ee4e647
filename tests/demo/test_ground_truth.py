"""The demo's ground truth is given to a run of the demo plays themselves, and to nothing else."""
from __future__ import annotations

import json

from mia_core.demo.ground_truth import adapter_training_plays, demo_book_truth
from mia_core.inputs.datasets import manifest_path

PLAYS = {"hamlet": (1, "To be, or not to be, that is the question"), "lear": (0, "Nothing will come of nothing")}


def test_truth_needs_every_book_to_be_a_demo_play_with_its_own_text():
    texts = {"hamlet": ["or not to be"], "lear": ["come of nothing"]}
    assert demo_book_truth(["lear", "hamlet", "hamlet"], lambda names: {n: texts[n] for n in names}, PLAYS) == {
        "hamlet": 1, "lear": 0}
    borrowed = {"hamlet": ["or not to be"], "lear": ["a text that only borrows the name"]}
    assert demo_book_truth(["hamlet", "lear"], lambda names: {n: borrowed[n] for n in names}, PLAYS) is None


def test_other_names_are_refused_without_reading_a_text():
    def never(names):
        raise AssertionError(f"texts read for {names}")

    assert demo_book_truth(["hamlet", "my novel"], never, PLAYS) is None
    assert demo_book_truth([], never, PLAYS) is None


def test_the_truth_is_the_committed_manifest_split():
    manifest = json.loads(manifest_path().read_text())["datasets"]["demo-books"]
    plays = adapter_training_plays()
    assert {p: label for p, (label, _) in plays.items()} == {e["id"]: e["label"] for e in manifest}
    assert sum(label for label, _ in plays.values()) == 6 and len(plays) == 12

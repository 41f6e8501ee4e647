"""Benchmark loaders read files in each hub data set's schema, offline."""
from __future__ import annotations

import json

import pytest

from mia_core.inputs.benchmarks import load_benchmark, to_frame


@pytest.mark.parametrize("name, rows, expected", [
    ("wikimia-32", [{"input": "old fact", "label": 1}, {"input": "new fact", "label": 0}], [1, 0]),
    ("bookmia", [{"book_id": 3, "book": "B", "snippet_id": 0, "snippet": "s", "label": 0},
                 {"book_id": 4, "book": "C", "snippet_id": 1, "snippet": "t", "label": 1}], [0, 1]),
    ("mimir-arxiv", [{"member": "m1", "nonmember": "n1"}, {"member": "m2", "nonmember": "n2"}], [1, 1, 0, 0]),
])
def test_benchmark_loaders_read_hub_schema_files_offline(name, rows, expected, tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    frame = load_benchmark(name, data_files=str(path))
    assert frame["label"].tolist() == expected and frame["text"].map(len).gt(0).all()
    if name == "bookmia":
        assert frame["book"].tolist() == ["B", "C"]
    with pytest.raises(KeyError, match="available"):
        load_benchmark("wikimia-33", data_files=str(path))
    with pytest.raises(ValueError):
        to_frame("nope", rows)

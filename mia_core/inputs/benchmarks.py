"""Public MIA benchmarks from the Hugging Face hub (when online), as labelled DataFrames.

WikiMIA (Shi et al. 2024; lengths 32/64/128/256, original and paraphrased), BookMIA (snippets of
books, `book` kept for cluster bootstraps) and MIMIR (Duan et al. 2024; member/non-member pairs
per Pile subset). Each loader also reads local files in the same schema (`data_files=`), which is
how they are tested offline. Labels: 1 = member.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class HubBenchmark:
    """Where a benchmark lives on the hub and which schema its rows follow."""

    repo: str
    config: str | None
    split: str
    schema: str  # "wikimia" | "bookmia" | "mimir"
    note: str = ""


def _registry() -> dict[str, HubBenchmark]:
    out: dict[str, HubBenchmark] = {}
    for length in (32, 64, 128, 256):
        out[f"wikimia-{length}"] = HubBenchmark("swj0419/WikiMIA", None, f"WikiMIA_length{length}", "wikimia",
                                                "temporal split: fails the blind-baseline check in the literature")
        out[f"wikimia-{length}-paraphrased"] = HubBenchmark(
            "swj0419/WikiMIA", None, f"WikiMIA_length{length}_paraphrased", "wikimia", "paraphrased inputs")
    out["bookmia"] = HubBenchmark("swj0419/BookMIA", None, "train", "bookmia",
                                  "member = books seen by OpenAI models; publication-date split")
    for subset in ("arxiv", "dm_mathematics", "github", "hackernews", "pile_cc", "pubmed_central", "wikipedia_(en)"):
        out[f"mimir-{subset}"] = HubBenchmark("iamgroot42/mimir", subset, "ngram_13_0.2", "mimir",
                                              "Pile train vs test, 13-gram overlap ≤ 20%: for Pythia/GPT-NeoX models")
    return out


BENCHMARKS = _registry()


def to_frame(schema: str, records) -> pd.DataFrame:
    """Rows of a hub schema → DataFrame with `text`, `label` (and `book` for BookMIA)."""
    rows = list(records)
    if schema == "wikimia":
        return pd.DataFrame({"text": [r["input"] for r in rows], "label": [int(r["label"]) for r in rows]})
    if schema == "bookmia":
        return pd.DataFrame({"text": [r["snippet"] for r in rows], "label": [int(r["label"]) for r in rows],
                             "book": [r["book"] for r in rows]})
    if schema == "mimir":  # each row pairs one member with one non-member
        texts = [r["member"] for r in rows] + [r["nonmember"] for r in rows]
        return pd.DataFrame({"text": texts, "label": [1] * len(rows) + [0] * len(rows)})
    raise ValueError(f"unknown benchmark schema {schema!r}")


def load_benchmark(name: str, *, data_files: str | list[str] | None = None) -> pd.DataFrame:
    """A benchmark as a labelled DataFrame: from the hub, or from local files in the hub schema."""
    import datasets

    try:
        spec = BENCHMARKS[name]
    except KeyError:
        raise KeyError(f"unknown benchmark {name!r}; available: {', '.join(BENCHMARKS)}") from None
    if data_files is not None:
        files = [data_files] if isinstance(data_files, str) else list(data_files)
        kind = "parquet" if str(files[0]).endswith(".parquet") else "json"
        rows = datasets.load_dataset(kind, data_files=files, split="train")
    else:
        rows = datasets.load_dataset(spec.repo, spec.config, split=spec.split)
    frame = to_frame(spec.schema, rows)
    frame.insert(0, "id", [f"{name}-{i}" for i in range(len(frame))])
    return frame

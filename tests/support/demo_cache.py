"""A fresh cache folder (`$MIA_LENS_CACHE`) that reads the demo model converted in the user cache: a test's statistics,
file-hash memos and results start empty, without converting the demo's GGUF again (about 20 s on a 2-core CPU)."""
from __future__ import annotations

from pathlib import Path

from mia_core.model.demo_weights import demo_folder


def fresh_cache_with_demo(folder: Path) -> Path:
    """`folder` made a cache root whose `models/` is the user cache's (where the demo is converted once)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models").symlink_to(demo_folder().parent)
    return folder

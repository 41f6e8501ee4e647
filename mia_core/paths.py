"""Where MIA Lens keeps its caches (`$MIA_LENS_CACHE`, else `~/.cache/mia-lens`) and finds its committed assets."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Root of every cache (converted demo model, token statistics, file hashes)."""
    env = os.environ.get("MIA_LENS_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "mia-lens"
    root.mkdir(parents=True, exist_ok=True)
    return root


def assets_dir() -> Path:
    """The committed demo assets (`$MIA_LENS_ASSETS` overrides the repository's `assets/`)."""
    env = os.environ.get("MIA_LENS_ASSETS")
    return Path(env) if env else Path(__file__).resolve().parents[1] / "assets"

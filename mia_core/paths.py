"""Where MIA Lens keeps its caches (`$MIA_LENS_CACHE`, else `~/.cache/mia-lens`) and finds its demo assets (in the
installed package, or the checkout's `assets/`)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Root of every cache (converted demo model, token statistics, file hashes)."""
    env = os.environ.get("MIA_LENS_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "mia-lens"
    root.mkdir(parents=True, exist_ok=True)
    return root


#: The demo assets inside an installed wheel (pyproject.toml ships the repository's `assets/` as `mia_core/assets`).
PACKAGED_ASSETS = Path(__file__).resolve().parent / "assets"
#: The committed demo assets in a checkout (or an editable install of one).
CHECKOUT_ASSETS = Path(__file__).resolve().parents[1] / "assets"


def assets_dir() -> Path:
    """The demo assets: `$MIA_LENS_ASSETS`, else the installed package's copy, else the checkout's `assets/`."""
    env = os.environ.get("MIA_LENS_ASSETS")
    if env:
        return Path(env)
    return PACKAGED_ASSETS if PACKAGED_ASSETS.is_dir() else CHECKOUT_ASSETS

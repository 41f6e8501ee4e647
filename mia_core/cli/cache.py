"""`mia cache info` and `mia cache clear`: the statistics cache, which keeps the token text of every scored text.

Where it lives: `$MIA_LENS_CACHE/stats` (default `~/.cache/mia-lens/stats`); its cap: `$MIA_LENS_CACHE_MAX_MB`
(see `mia_core.model.stats_cache`). The converted demo model and the weight-hash memos beside it hold no text
and are kept.
"""
from __future__ import annotations

import typer

from ..model.stats_cache import MB, StatsCache
from ..paths import cache_root
from .terminal import echo

commands = typer.Typer()
cache_app = typer.Typer(no_args_is_help=True, help="The token-statistics cache (holds the token text of every "
                        "scored text): show it, empty it.")
commands.add_typer(cache_app, name="cache")


def stats_cache() -> StatsCache:
    """The cache the models use by default (`LanguageModel`), with the cap from the environment."""
    return StatsCache(cache_root() / "stats")


@cache_app.command("info")
def cache_info() -> None:
    """Where the statistics cache is, how many entries it holds, its size and its cap."""
    cache = stats_cache()
    usage = cache.usage()
    echo(f"path: {usage.path}")
    echo(f"entries: {usage.entries}")
    echo(f"size: {usage.bytes / MB:.2f} MB")
    echo(f"cap: {cache.max_bytes / MB:.2f} MB (MIA_LENS_CACHE_MAX_MB; least recently used entries go first)")


@cache_app.command("clear")
def cache_clear() -> None:
    """Remove every cached statistics entry (the token text of scored texts); later runs recompute them."""
    removed = stats_cache().clear()
    echo(f"removed {removed.entries} entries ({removed.bytes / MB:.2f} MB) from {removed.path}")

"""The scoring backends: "local" (in `mia_core.scoring`) and "ray", registered here so scoring never imports Ray."""
from __future__ import annotations

from typing import Callable, Sequence

from ..model.language_model import LanguageModel
from ..api import TokenStats
from ..scoring import STATS_BACKENDS, check_backend, register_backend
from .ray_driver import RayOptions, resolve_options, token_stats


def ray_stats(lm: LanguageModel, texts: Sequence[str], *, bos: str, long_text: str,
              progress: Callable[[int, int], None] | None, address: str | None = None,
              options: RayOptions | None = None) -> list[TokenStats]:
    """The texts' statistics computed by model actors on a Ray cluster (`address`, else `$RAY_ADDRESS` or local)."""
    return token_stats(lm, list(texts), bos=bos, long_text=long_text, progress=progress,
                       options=resolve_options(address, options))


register_backend("ray", ray_stats)
#: Every backend name, for option checks (local first).
BACKENDS = tuple(STATS_BACKENDS)

__all__ = ["BACKENDS", "check_backend", "ray_stats"]

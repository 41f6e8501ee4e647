"""Where the target's statistics are computed: "local" (this process) here; `mia_core.runs` registers "ray"."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ..api import TokenStats
from ..model.language_model import LanguageModel
from ..names import check_choice

#: A backend: fn(lm, texts, *, bos, long_text, progress, address, options) -> the texts' `TokenStats`, in order.
StatsBackend = Callable[..., list[TokenStats]]


def _local_stats(lm: LanguageModel, texts: Sequence[str], *, bos: str, long_text: str,
                 progress: Callable[[int, int], None] | None, address=None, options=None) -> list[TokenStats]:
    """This process: `lm.token_stats` (the backend options do not apply)."""
    return lm.token_stats(texts, bos=bos, progress=progress, long_text=long_text)


#: Where the target's statistics are computed, by name; `mia_core.runs.backends` registers "ray".
STATS_BACKENDS: dict[str, StatsBackend] = {"local": _local_stats}


def register_backend(name: str, backend: StatsBackend) -> None:
    """Make `backend` selectable as `score_texts(..., backend=name)`."""
    STATS_BACKENDS[name] = backend


def check_backend(backend: str) -> None:
    """ValueError naming the closest backend unless `backend` is registered."""
    check_choice("backend", backend, STATS_BACKENDS)


def text_stats(
    lm: LanguageModel,
    texts: Sequence[str],
    *,
    bos: str = "auto",
    long_text: str = "sliding",
    progress: Callable[[int, int], None] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    ray_options: Any = None,
) -> list[TokenStats]:
    """`lm.token_stats(texts)` computed in this process ("local") or by model actors on a Ray cluster ("ray")."""
    check_backend(backend)
    return STATS_BACKENDS[backend](lm, list(texts), bos=bos, long_text=long_text, progress=progress,
                                   address=ray_address, options=ray_options)

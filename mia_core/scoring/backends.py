"""Where the target's statistics are computed: "local" (this process) here; `mia_core.runs` registers "ray"."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from ..api import TokenStats
from ..model.language_model import LanguageModel
from ..names import check_choice

#: A backend: fn(lm, texts, *, bos, long_text, progress, address, options) -> the texts' `TokenStats`, in order.
#: One that also takes `on_batch` calls on_batch(indices, statistics) as each group of texts' statistics arrives.
StatsBackend = Callable[..., list[TokenStats]]
OnBatch = Callable[[list[int], list[TokenStats]], None]


def _local_stats(lm: LanguageModel, texts: Sequence[str], *, bos: str, long_text: str,
                 progress: Callable[[int, int], None] | None, address=None, options=None,
                 on_batch: OnBatch | None = None) -> list[TokenStats]:
    """This process: `lm.token_stats` (the backend options do not apply), each batch's texts handed on as they are
    ready."""
    return lm.token_stats(texts, bos=bos, progress=progress, long_text=long_text, on_batch=on_batch)


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
    on_batch: OnBatch | None = None,
) -> list[TokenStats]:
    """`lm.token_stats(texts)` computed in this process ("local") or by model actors on a Ray cluster ("ray").

    on_batch : called as on_batch(indices, statistics) with every text exactly once: group by group as they arrive
        where the backend streams (local: each finished batch's texts, while the device runs the next batch), else
        all at once when all are back.
    """
    check_backend(backend)
    fn = STATS_BACKENDS[backend]
    where = {"bos": bos, "long_text": long_text, "progress": progress, "address": ray_address, "options": ray_options}
    if on_batch is None or "on_batch" in inspect.signature(fn).parameters:
        return fn(lm, list(texts), **where, **({} if on_batch is None else {"on_batch": on_batch}))
    stats = fn(lm, list(texts), **where)
    on_batch(list(range(len(stats))), stats)
    return stats

"""Building a reference set by scoring known non-members, and the demo's built-in one.

The demo's reference set is a seeded half of the demo-wiki non-members (balanced over the 32/64/128
word buckets); the other half stays free as held-out non-members (for example the validation set of
dataset inference or a check that p-values of non-members are uniform).
"""
from __future__ import annotations

import datetime
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..inputs import datasets
from ..model.builtin import BUILTIN_NAMES
from ..model.identity import text_sha256
from ..model.language_model import LanguageModel
from ..scoring import score_texts
from ..version import code_version
from .progress import TextsClock, TextsProgress
from .reference_set import ReferenceSet

DEMO_REFERENCE = "demo"
#: Share of the demo-wiki non-members that form the demo reference set (the rest are held out).
DEMO_SHARE = 0.5
DEMO_SEED = 0


def build_reference(lm: LanguageModel, texts: Sequence[str], methods: Sequence[str], *, k: float | None = None,
                    bos: str = "auto", long_text: str = "sliding", params: dict | None = None,
                    inputs: dict | None = None, source: str = "",
                    progress: Callable[[int, int], None] | None = None,
                    on_texts: Callable[[TextsProgress], None] | None = None) -> ReferenceSet:
    """Score known non-member texts with `methods` under `lm` and keep the scores with what produced them.

    progress : called as progress(tokens fed, all tokens) after each batch of the model pass (a bar, or a check that
        stops the work). on_texts : called with a `TextsProgress` (texts done of all, elapsed, ETA) as texts finish.
    """
    texts = [str(t) for t in texts]
    if not texts:
        raise ValueError("a reference set needs at least one known non-member text")
    if len(set(texts)) != len(texts):
        raise ValueError("the reference texts contain duplicates; each known non-member must appear once")
    params = dict(params or {})
    clock = TextsClock(len(texts), on_texts) if on_texts is not None else None
    if clock is not None:  # "0 of 120 texts" as the pass starts: its first batch may take a while on a CPU
        on_texts(clock.progress())

    def fed(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        if clock is not None:
            clock.tokens_fed(done, total)

    stats = lm.token_stats(texts, bos, fed, long_text=long_text, on_stats=clock.text_ready if clock else None)
    scores = score_texts(lm, texts, list(methods), k=k, bos=bos, long_text=long_text, stats=stats,
                         **params, **dict(inputs or {}))
    table = pd.concat([pd.DataFrame({"sha256": [text_sha256(t) for t in texts],
                                     "n_tokens": [s.n_scored for s in stats]}), scores[list(methods)]], axis=1)
    return ReferenceSet(model=lm.name, fingerprint=lm.fingerprint, dtype=str(lm.dtype).removeprefix("torch."),
                        methods=tuple(methods), k=k, bos=bos, long_text=long_text, table=table,
                        params={n: _plain(v) for n, v in params.items()}, source=source,
                        created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                        code_version=code_version())


def demo_split(seed: int = DEMO_SEED, share: float = DEMO_SHARE) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(reference, held out): the demo-wiki non-members split in two, balanced over the length buckets."""
    nonmembers = datasets.load("demo-wiki").query("label == 0")
    rng = np.random.default_rng(seed)
    chosen = np.zeros(len(nonmembers), dtype=bool)
    for _, rows in nonmembers.groupby("bucket").indices.items():
        chosen[rng.choice(rows, int(round(share * len(rows))), replace=False)] = True
    return nonmembers[chosen].reset_index(drop=True), nonmembers[~chosen].reset_index(drop=True)


@lru_cache(maxsize=1)
def demo_texts() -> tuple[tuple[str, ...], str]:
    """The demo reference set's texts (a seeded half of the demo-wiki non-members) and the words naming them (read
    once per process: a page asks on every rerun)."""
    reference, held_out = demo_split()
    return tuple(reference["text"]), (f"demo-wiki non-members, seeded half ({len(reference)} of "
                                        f"{len(reference) + len(held_out)}; Wikipedia leads held out from "
                                        "demo-known's training)")


def check_demo_model(lm: LanguageModel) -> None:
    """The demo reference set is for the demo models only: a ValueError for any other."""
    if lm.spec not in BUILTIN_NAMES:
        raise ValueError(f"the demo reference set is for the demo models (demo, demo-known), not {lm.name}; "
                         "build one for this model from known non-members: mia reference build")


def demo_reference(lm: LanguageModel, methods: Sequence[str], *, k: float | None = None, bos: str = "auto",
                   params: dict | None = None, progress: Callable[[int, int], None] | None = None,
                   on_texts: Callable[[TextsProgress], None] | None = None) -> ReferenceSet:
    """The built-in reference set of the demo models: half the demo-wiki non-members, scored now (statistics cached)."""
    check_demo_model(lm)
    texts, source = demo_texts()
    return build_reference(lm, texts, methods, k=k, bos=bos, params=params, progress=progress, on_texts=on_texts,
                           source=source)


def _plain(value):
    """A JSON-able record of a method parameter (numbers and strings as they are, else its type)."""
    return value if value is None or isinstance(value, (bool, int, float, str)) else f"<{type(value).__name__}>"

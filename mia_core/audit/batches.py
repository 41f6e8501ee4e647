"""How a run's pending snippets are cut into batches and claimed: a small first batch (a first result soon), then
batches doubling to the full size; each batch claimed in the store before it is scored (`runs.claims`), so two
processes on one run split it."""
from __future__ import annotations

import time
from typing import Callable, Iterator

from ..runs.ray_driver import WorkerError
from ..runs.store import ResultsStore

#: Seconds between two looks at a run whose pending snippets another live process has claimed (see `runs.claims`).
CLAIM_POLL_S = 2.0


def batch_sizes(first: int, normal: int) -> Iterator[int]:
    """Snippets per batch: `first`, then doubling up to `normal`, then `normal` (a small first batch, then full ones)."""
    if first < 1 or normal < 1:
        raise ValueError(f"batch sizes must be at least 1 (got first {first}, normal {normal})")
    size = min(first, normal)
    while True:
        yield size
        size = min(2 * size, normal)


def score_claimed(store: ResultsStore, run_id: str, session: str, sizes: Iterator[int] | None,
                   score: Callable[[list[str]], str]) -> str:
    """`compute_claimed` over the run's snippets."""
    return compute_claimed(lambda: store.pending_ids(run_id)["snippet_id"].tolist(),
                           lambda ids: store.claim_snippets(run_id, session, ids), sizes, score)


def compute_claimed(pending_ids: Callable[[], list[str]], claim: Callable[[list[str]], list[str]],
                    sizes: Iterator[int] | None, score: Callable[[list[str]], str]) -> str:
    """Read the pending units of work (snippets, extraction units), claim them a batch at a time (`sizes`; None: all
    at once) and score what was claimed (storing a batch releases its claims; a batch size is used up only by a batch
    scored); again until nothing is pending, waiting while another live process holds the rest (its claims lapse when
    it dies). A message if some failed on Ray."""
    step = None if sizes is None else next(sizes)
    while True:
        pending = pending_ids()
        if not pending:
            return ""
        start, claimed_any = 0, False
        while start < len(pending):
            end = len(pending) if step is None else start + step
            ids = claim(pending[start:end])
            start = end
            if not ids:
                continue
            claimed_any = True
            failed = score(ids)  # storing the scores releases their claims (`ResultsStore.write_scores`)
            if failed:
                return failed
            step = None if sizes is None else next(sizes)
        if not claimed_any:
            time.sleep(CLAIM_POLL_S)


def run_claimed(store: ResultsStore, run_id: str, claimed: Callable[[], str], release: Callable[[], None],
                done: str) -> None:
    """Run a claim loop (`compute_claimed`) under the run's status: "interrupted" with the error when it stops,
    "failed" (`WorkerError`) when Ray chunks still failed, else "scored" with `done`; the session's claims are
    released however it ends."""
    try:
        failed = claimed()
    except BaseException as err:
        store.set_status(run_id, "interrupted", f"{type(err).__name__}: {err}"[:500])
        raise
    finally:
        release()
    if failed:
        store.set_status(run_id, "failed", failed[:500])
        raise WorkerError(failed)
    store.set_status(run_id, "scored", done)

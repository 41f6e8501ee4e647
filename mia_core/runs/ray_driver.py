"""The Ray backend: score on a Ray cluster, one model actor per GPU or per `gpus_per_actor` GPUs (CPU actors where
there is none).

Ray is optional (the `scale` extra: `pip install "mia-lens[scale]"`) and imported only here, only when this backend runs.
The driver cuts the work into chunks (the local path's batches), builds a `ray.data` dataset of
them and runs `map_batches` with `ChunkWorker`, a callable class whose actors each load the model
by its reference (a `ModelRef`: spec and load options, never a model object) and check its
fingerprint. Workers send back compact results — scores, or `TokenStats` arrays packed as npz
bytes, never logits — which the driver consumes as they stream (`iter_batches`), so a caller can
commit each chunk at once. A chunk whose call raises comes back as error rows; the driver runs
those chunks again (another Ray pass) and reports what still fails, keeping everything finished.
"""
from __future__ import annotations

from . import ray_env  # noqa: I001  (first: Ray reads these settings when it is imported)

import logging
import os
from dataclasses import dataclass, replace
from typing import Callable

import pandas as pd

from ..model.forward import pack_lengths, split_windows
from ..model.language_model import LanguageModel
from ..model.options import ModelRef
from ..model.policy import StatsPolicy
from ..api import TokenStats
from .ray_worker import FAIL_ENV, ChunkWorker
from .stats_task import stats_failed, stats_task, unpack_stats

INSTALL_HINT = 'the Ray backend needs Ray: pip install "mia-lens[scale]"'
#: Variables the workers of an existing cluster get from the driver (cache location, offline hub).
FORWARD_ENV = ("MIA_LENS_CACHE", "HF_HUB_OFFLINE", "HF_HOME", "HF_HUB_CACHE")
#: Padded tokens per chunk of `token_stats` work: 4 local CPU batches; on GPUs the largest local budget.
CPU_CHUNK_TOKENS = 4 * 4096
GPU_CHUNK_TOKENS = 1 << 17
Chunk = tuple[list, list[str]]  # (ids, texts)
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayOptions:
    """Where and how the Ray backend runs."""

    address: str | None = None
    """Cluster address (`ray://…` or host:port); None: `$RAY_ADDRESS`, else a new local instance on loopback."""
    actors: int | None = None
    """Model actors; None: one per GPU of the cluster, else one per `cpus_per_actor` CPUs (never more than chunks)."""
    cpus_per_actor: int = 1
    """CPUs (and torch threads) each actor takes on a cluster without GPUs."""
    gpus_per_actor: int | None = None
    """GPUs each actor takes on a cluster with GPUs (None: 1); an actor given several shards its model across them
    when it does not fit one (`load_model`'s device "auto", or the model options' `max_memory`)."""
    model: ModelRef | None = None
    """The model the statistics workers load and how; None: the driver model's spec, dtype and context
    (`ModelRef.of`). A book audit's workers load the audit's own reference."""
    runtime_env: dict | None = None
    """Ray runtime env for the actors (e.g. pip, working_dir); `FORWARD_ENV` variables are added."""
    retries: int = 1
    """Further Ray passes over chunks that failed."""
    chunk_tokens: int | None = None
    """Padded tokens per chunk of `token_stats` work (None: 16k on CPU clusters, 128k on GPU ones)."""


class WorkerError(RuntimeError):
    """Chunks that still failed on the workers after every retry (finished work is kept)."""


def resolve_options(address: str | None, options: RayOptions | None) -> RayOptions:
    """`options` (default ones if None) with `address` when one is given."""
    options = options or RayOptions()
    return replace(options, address=address) if address else options


def require_ray():
    """The `ray` module with `ray.data`, or an ImportError saying how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{INSTALL_HINT} ({err})") from None
    return ray


def connect(address: str | None = None):
    """Join the cluster at `address` (or `$RAY_ADDRESS`); without either, start a local instance on loopback."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    ray = require_ray()
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # our own progress and errors say what happens
    if not ray.is_initialized():  # an instance the caller started is used as it is
        if address is None:  # binds to 127.0.0.1 only: `ray_env`, imported before Ray, set that up
            if any(os.environ.get(k) != v for k, v in ray_env.LOOPBACK.items()):
                LOG.warning("the local Ray instance will listen on every network interface: %s is set",
                            ", ".join(ray_env.LOOPBACK))
            ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    return ray


def run_chunks(chunks: list[Chunk], job: dict, options: RayOptions,
               on_done: Callable[[int, pd.DataFrame], None]) -> dict[int, str]:
    """Run every chunk on the actor pool, calling `on_done(chunk, rows)` as each finishes (rows in id order).

    `job` tells the workers what to do (`ChunkWorker`). Failed chunks are run again `options.retries`
    times; returns {chunk: error} of those that still failed.
    """
    ray = connect(options.address)
    todo = list(range(len(chunks)))
    failed: dict[int, str] = {}
    attempts = 1 + max(0, options.retries)
    for attempt in range(attempts):
        if not todo:
            break
        if attempt:
            LOG.warning("%d of %d chunks failed on the Ray workers (first error: %s); retrying them (attempt %d of %d)",
                        len(todo), len(chunks), failed[todo[0]], attempt + 1, attempts)
        drill = _drill_chunks() if attempt == 0 else ()
        failed = _one_pass(ray, {c: chunks[c] for c in todo}, job, options, drill, on_done)
        todo = sorted(failed)
    return failed


def _one_pass(ray, chunks: dict[int, Chunk], job: dict, options: RayOptions, drill: tuple[int, ...],
              on_done: Callable[[int, pd.DataFrame], None]) -> dict[int, str]:
    """One `ray.data` pass over the chunks; {chunk: error} of those that failed or never came back."""
    items = [{"chunk": c, "ids": list(ids), "texts": list(texts)} for c, (ids, texts) in chunks.items()]
    size, resources = _actor_pool(ray, options, len(items))
    if options.address or os.environ.get("RAY_ADDRESS"):  # an existing cluster: its workers need our settings
        env = {**(options.runtime_env or {})}
        env["env_vars"] = {**{k: os.environ[k] for k in FORWARD_ENV if k in os.environ}, **env.get("env_vars", {})}
        resources["runtime_env"] = env
    elif options.runtime_env:
        resources["runtime_env"] = options.runtime_env
    dataset = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        ChunkWorker, batch_size=1, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=size),
        fn_constructor_kwargs={"job": job, "drill": drill}, **resources)
    failed: dict[int, str] = {}
    waiting = set(chunks)
    try:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pandas"):
            for chunk, rows in batch.groupby("chunk", sort=False):
                chunk = int(chunk)
                waiting.discard(chunk)
                errors = rows["error"][rows["error"] != ""]
                if len(errors):
                    failed[chunk] = str(errors.iloc[0])
                    continue
                order = {key: i for i, key in enumerate(chunks[chunk][0])}
                on_done(chunk, rows.sort_values("id", key=lambda s: s.map(order)).drop(columns=["chunk", "error"])
                        .reset_index(drop=True))
    except Exception as err:  # the pass itself broke (an actor died, the cluster went away): retry what is left
        failed.update({c: f"{type(err).__name__}: {err}".splitlines()[0] for c in waiting})
    return failed


def _actor_pool(ray, options: RayOptions, n_chunks: int) -> tuple[int, dict]:
    """(actors, resources per actor) on the connected cluster (`actor_plan`)."""
    return actor_plan(ray.cluster_resources(), options, n_chunks)


def actor_plan(available: dict, options: RayOptions, n_chunks: int) -> tuple[int, dict]:
    """(actors, resources per actor) for a cluster's resources (`ray.cluster_resources()`): actors of
    `gpus_per_actor` GPUs each (`num_gpus`), else CPU actors with `num_cpus=cpus_per_actor`; never more than chunks.
    Raises ValueError when the cluster cannot give one actor the GPUs asked for."""
    gpus = int(available.get("GPU", 0))
    per_gpu_actor = options.gpus_per_actor or 1
    if options.gpus_per_actor and per_gpu_actor > gpus:
        raise ValueError(f"--ray-gpus-per-actor {per_gpu_actor}: the Ray cluster has {gpus} GPU(s)"
                         + ("" if gpus else "; leave the option out to run CPU actors"))
    if gpus:
        fits = gpus // per_gpu_actor
        return max(1, min(options.actors or fits, fits, n_chunks)), {"num_gpus": per_gpu_actor}
    per_actor = max(1, options.cpus_per_actor)
    fits = max(1, int(available.get("CPU", 1)) // per_actor)
    return max(1, min(options.actors or fits, fits, n_chunks)), {"num_cpus": per_actor}


def cluster_has_gpus(options: RayOptions) -> bool:
    """Whether the cluster has GPUs (then actors take `gpus_per_actor` each, and chunks are larger)."""
    return int(connect(options.address).cluster_resources().get("GPU", 0)) > 0


def _drill_chunks() -> tuple[int, ...]:
    """Chunks the failure drill (`FAIL_ENV`) makes fail on their first attempt."""
    raw = os.environ.get(FAIL_ENV, "")
    return tuple(int(x) for x in raw.split(",") if x.strip())


def token_stats(lm: LanguageModel, texts: list[str], *, bos: str = "auto", long_text: str = "sliding",
                options: RayOptions | None = None, progress: Callable[[int, int], None] | None = None) -> list[TokenStats]:
    """`lm.token_stats(texts)` computed by model actors on the cluster, in input order.

    Texts are sorted by length and cut into chunks of about `options.chunk_tokens` padded tokens;
    each worker packs its chunk into batches under its own budget, as the local path does.
    """
    StatsPolicy(bos, long_text)  # validated before any worker starts
    options = options or RayOptions()
    texts = [str(t) for t in texts]
    if not texts:
        return []
    costs = [_cost(len(ids) + 1, lm.max_length, long_text) for ids in lm.tokenizer(texts)["input_ids"]]
    budget = options.chunk_tokens or (GPU_CHUNK_TOKENS if cluster_has_gpus(options) else CPU_CHUNK_TOKENS)
    chunks = [(ids, [texts[j] for j in ids]) for ids in pack_lengths(costs, budget)]
    job = {"task": stats_task, "failed_rows": stats_failed, "model": (options.model or ModelRef.of(lm)).portable(),
           "fingerprint": lm.fingerprint, "bos": bos, "long_text": long_text}
    out: list[TokenStats | None] = [None] * len(texts)
    total, done = sum(costs), 0

    def collect(chunk: int, rows: pd.DataFrame) -> None:
        nonlocal done
        for i, payload in zip(rows["id"], rows["payload"]):
            out[int(i)] = unpack_stats(payload, texts[int(i)])
            done += costs[int(i)]
        if progress is not None:
            progress(done, total)

    failed = run_chunks(chunks, job, options, collect)
    if failed:
        n = sum(len(chunks[c][0]) for c in failed)
        raise WorkerError(f"{n} of {len(texts)} texts failed on the Ray workers after {1 + options.retries} "
                          f"attempts (first error: {next(iter(failed.values()))})")
    return out  # type: ignore[return-value]


def _cost(n_tokens: int, context: int, long_text: str) -> int:
    """Padded tokens a text costs: cut to the context, or the tokens its sliding windows feed."""
    if n_tokens <= context:
        return n_tokens
    if long_text == "truncate":
        return context
    return sum(end - start for start, end, _ in split_windows(n_tokens, context, context // 2))

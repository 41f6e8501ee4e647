"""The Ray backend's worker: an actor class holding one loaded model, and the compact form results travel in.

Runs on the cluster's nodes (`mia_core.ray_backend` drives it). Each actor loads the model by its
spec and checks the fingerprint; a call scores a batch of chunks and returns one row per id with
scores, or `TokenStats` packed as npz bytes (per-token arrays only, never logits). Errors come
back in the rows, never raised, so one failing chunk cannot stop a run.
"""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd

from .token_stats import ARRAY_FIELDS, TokenStats, stats_from_parts, stats_parts

#: Failure drill (read by the driver): comma-separated chunk numbers whose first attempt raises in the worker.
FAIL_ENV = "MIA_LENS_RAY_FAIL_CHUNKS"


class ChunkWorker:
    """A Ray actor holding one loaded model; called with a batch of chunks, returns one row per id.

    `job`: {"task": "audit" | "stats", "model": spec, "fingerprint": the run's, "load": load_model
    options, plus "settings" (audit) or "bos"/"long_text" (stats)}. Errors — loading, a fingerprint
    that differs, a chunk that raises — are returned in the rows' `error` column, never raised.
    """

    def __init__(self, job: dict, drill: tuple[int, ...] = ()) -> None:
        self.job, self.drill, self.lm, self.error = job, set(drill), None, ""
        try:
            from .loading import load_model

            self.lm = load_model(job["model"], **job["load"])
            if self.lm.fingerprint != job["fingerprint"]:
                self.error = (f"the worker's model {job['model']} has fingerprint {self.lm.fingerprint}, "
                              f"not {job['fingerprint']} (a different model or files on this node)")
        except Exception as err:  # reported per row; the driver retries, then reports
            self.error = f"{type(err).__name__}: {err}".splitlines()[0]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        frames = []
        for chunk, ids, texts in zip(batch["chunk"], batch["ids"], batch["texts"]):
            ids, texts = np.asarray(ids).tolist(), [str(t) for t in texts]
            try:
                if self.error:
                    raise RuntimeError(self.error)
                if int(chunk) in self.drill:
                    raise RuntimeError(f"failure drill: chunk {int(chunk)} fails on its first attempt ({FAIL_ENV})")
                frame = _TASKS[self.job["task"]](self.lm, texts, self.job)
                frame["error"] = ""
            except Exception as err:
                frame = _TASK_FAILED[self.job["task"]](len(texts))
                frame["error"] = f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else type(err).__name__
            frame.insert(0, "id", ids)
            frame.insert(0, "chunk", int(chunk))
            frames.append(frame)
        out = pd.concat(frames, ignore_index=True)
        return {name: out[name].to_numpy() for name in out.columns}


def _audit_task(lm, texts: list[str], job: dict) -> pd.DataFrame:
    """Snippet scores exactly as the local audit path computes them."""
    from .audit.jobs import AuditSettings, score_snippets

    return score_snippets(lm, texts, AuditSettings(**job["settings"]))


def _stats_task(lm, texts: list[str], job: dict) -> pd.DataFrame:
    stats = lm.token_stats(texts, bos=job["bos"], long_text=job["long_text"])
    return pd.DataFrame({"payload": np.array([pack_stats(s) for s in stats], dtype=object)})


_TASKS = {"audit": _audit_task, "stats": _stats_task}
_TASK_FAILED = {
    "audit": lambda n: pd.DataFrame({"score": np.full(n, np.nan), "n_tokens": np.zeros(n, np.int64),
                                     "truncated": np.zeros(n, bool)}),
    "stats": lambda n: pd.DataFrame({"payload": np.array([b""] * n, dtype=object)}),
}


def pack_stats(stats: TokenStats) -> bytes:
    """Per-token arrays and flags of one text as npz bytes (the text itself stays on the driver)."""
    arrays, meta = stats_parts(stats)
    buffer = io.BytesIO()
    meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode(), np.uint8)  # UTF-8, not numpy's UTF-32
    np.savez(buffer, meta=meta_bytes, **arrays)
    return buffer.getvalue()


def unpack_stats(payload: bytes, text: str) -> TokenStats:
    """The `TokenStats` packed by `pack_stats`, for `text`."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as data:
        arrays = {name: data[name] for name in ARRAY_FIELDS}
        meta = json.loads(data["meta"].tobytes().decode())
    return stats_from_parts(text, arrays, meta)

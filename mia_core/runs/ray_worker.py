"""The Ray backend's worker: an actor holding one loaded model that runs the task function its job names.

Generic: the job spec carries the task as a function (`job["task"](lm, texts, job) -> DataFrame`)
and the rows to return when it fails (`job["failed_rows"](n) -> DataFrame`), so this module never
imports what it runs (an audit, a statistics pass). Each actor loads the model by its reference (a
`ModelRef`: spec and load options, never a model object) and checks the fingerprint; errors come
back in the rows, never raised, so one failing chunk cannot stop a run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

#: Failure drill (read by the driver): comma-separated chunk numbers whose first attempt raises in the worker.
FAIL_ENV = "MIA_LENS_RAY_FAIL_CHUNKS"


class ChunkWorker:
    """A Ray actor holding one loaded model; called with a batch of chunks, returns one row per id.

    `job`: {"task": fn(lm, texts, job) -> DataFrame, "failed_rows": fn(n) -> DataFrame of the same
    columns, "model": a `ModelRef` (which model, how it is loaded), "fingerprint": the run's, plus whatever
    the task reads}. Errors — loading, a fingerprint that differs, a chunk that raises — are
    returned in the rows' `error` column, never raised.
    """

    def __init__(self, job: dict, drill: tuple[int, ...] = ()) -> None:
        self.job, self.drill, self.lm, self.error = job, set(drill), None, ""
        try:
            self.lm = job["model"].load()
            if self.lm.fingerprint != job["fingerprint"]:
                self.error = (f"the worker's model {job['model'].spec} has fingerprint {self.lm.fingerprint}, "
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
                frame = self.job["task"](self.lm, texts, self.job)
                frame["error"] = ""
            except Exception as err:
                frame = self.job["failed_rows"](len(texts))
                frame["error"] = f"{type(err).__name__}: {err}".splitlines()[0] if str(err) else type(err).__name__
            frame.insert(0, "id", ids)
            frame.insert(0, "chunk", int(chunk))
            frames.append(frame)
        out = pd.concat(frames, ignore_index=True)
        return {name: out[name].to_numpy() for name in out.columns}

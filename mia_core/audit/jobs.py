"""Book-audit jobs: plan the snippets into the results store (`planning`), score what is pending, analyse what is
stored.

A job's id is derived from everything that determines its scores (`planning.plan_audit`), so running the same
audit again resumes it: only snippets without a stored score are computed. The analysis (threshold rule, target
FPR, bootstrap seed) runs on the stored keys and scores, without texts, and can be redone without the model;
texts are fetched only for the snippets shown.
"""
from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from ..model.language_model import LanguageModel
from ..model.options import ModelRef
from ..runs import ray_driver
from ..runs.backends import check_backend
from ..runs.ray_driver import RayOptions
from ..runs.store import ResultsStore
from ..scoring import score_table
from ..version import code_version
from .batches import batch_sizes, run_claimed, score_claimed
from .books import analyse_books
from .extraction import ExtractionEvidence
from .calibration import Calibration, calibrate
from .planning import plan_audit
from .settings import AuditSettings
from .sources import Book, Problem, problem_rows

__all__ = ["TEXT_CHUNK_ROWS", "AuditResult", "AuditSettings", "audit_result", "audit_task", "plan_audit",
           "run_audit", "run_scoring", "score_snippets"]

#: Snippet texts fetched per query when a whole table with texts is written (snippets.csv): about 60 MB of text
#: at 512-word snippets, so exporting 10^6 snippets never holds more than one chunk of texts.
TEXT_CHUNK_ROWS = 20_000
Progress = Callable[[int, int], None]


@dataclass
class AuditResult:
    """A finished audit: the run's record, calibration, per-book table, scored snippets (no texts) and problems.

    Texts of the snippets shown are fetched from `store` by id (`texts`, `snippet_chunks`).
    """

    run: dict
    settings: AuditSettings
    calibration: Calibration
    books: pd.DataFrame
    snippets: pd.DataFrame
    problems: pd.DataFrame
    store: ResultsStore | None = None
    #: The extraction pass's evidence about the model (`mia audit-books --extraction`), or None.
    extraction: ExtractionEvidence | None = None

    def texts(self, ids: Sequence[str]) -> pd.Series:
        """The texts of these snippets, indexed by snippet id, in the order asked."""
        if self.store is None:
            raise ValueError("this audit result has no results store to read snippet texts from")
        return self.store.snippet_texts(self.run["run_id"], list(ids))

    def snippet_chunks(self, rows: int = TEXT_CHUNK_ROWS) -> Iterator[pd.DataFrame]:
        """`snippets` in order, `rows` at a time, each chunk with its texts (column text)."""
        for start in range(0, len(self.snippets), rows):
            chunk = self.snippets.iloc[start:start + rows]
            yield chunk.assign(text=self.texts(chunk["snippet_id"]).to_numpy())


def run_scoring(store: ResultsStore, run_id: str, model: ModelRef, *, lm: LanguageModel | None = None,
                progress: Progress | None = None, backend: str = "local", ray_address: str | None = None,
                ray_options: RayOptions | None = None, first_batch: int | None = None) -> int:
    """Score every pending snippet of the run, committing each batch; returns how many were computed now.

    model : which model scores and how it is loaded: here (local backend) or by each Ray worker, which checks
        its fingerprint against the run's.
    lm : `model` already loaded in this process, for the local backend (else it is loaded here).
    backend : "local" (this process) or "ray" (model actors on a Ray cluster, see `mia_core.runs.ray_driver`;
        `ray_address` picks the cluster). Both commit every batch to the store as soon as it is scored.
    first_batch : snippets in the first local batch (default: the settings' `batch_snippets`); each later batch
        doubles, up to `batch_snippets`, so a small first batch shows a first result soon (`timing.first_batch_size`).
    Raises `WorkerError` when Ray batches still fail after their retry: the run is then marked
    failed, everything finished stays stored, and running it again retries the rest.
    """
    check_backend(backend)
    run = store.run(run_id)
    if backend == "local":
        lm = lm if lm is not None else model.load()
        if run["fingerprint"] != lm.fingerprint:
            raise ValueError(f"run {run_id} was scored with model {run['model']} (fingerprint {run['fingerprint']}); "
                             f"the loaded model has fingerprint {lm.fingerprint}")
    settings = AuditSettings(**run["config"])
    done, total = store.progress(run_id)
    store.set_status(run_id, "running", f"{done} of {total} snippets scored", backend=backend, owner=True)
    session = uuid.uuid4().hex[:12]
    written = 0

    def commit(ids, scores: pd.DataFrame) -> None:
        nonlocal written
        scores.insert(0, "snippet_id", list(ids))
        store.write_scores(run_id, scores, fingerprint=run["fingerprint"], method=settings.method,
                           params=settings.params, code_version=code_version(), session=session)
        written += len(scores)
        if progress:
            progress(done + written, total)

    def score(ids: list[str]) -> str:
        """Score claimed snippets: a message if some failed on Ray."""
        if backend == "ray":
            batches = [ids[i:i + settings.batch_snippets] for i in range(0, len(ids), settings.batch_snippets)]
            return _score_on_ray(run, model, [store.snippet_texts(run_id, b) for b in batches], settings, commit,
                                 ray_address, ray_options)
        commit(ids, score_snippets(lm, store.snippet_texts(run_id, ids).tolist(), settings))  # texts per batch
        return ""

    sizes = None if backend == "ray" else batch_sizes(first_batch or settings.batch_snippets, settings.batch_snippets)
    run_claimed(store, run_id, lambda: score_claimed(store, run_id, session, sizes, score),
                lambda: store.release_claims(run_id, session), f"{total} of {total} snippets scored")
    return written


def _score_on_ray(run: dict, model: ModelRef, batches: list[pd.Series], settings: AuditSettings, commit,
                  address: str | None, options: RayOptions | None) -> str:
    """Score the batches (texts indexed by snippet id) on Ray model actors, each loading `model`, committing each
    batch as it streams back; a message if some still failed."""
    options = ray_driver.resolve_options(address, options)
    job = {"task": audit_task, "failed_rows": audit_failed_rows, "model": model.portable(),
           "fingerprint": run["fingerprint"], "settings": asdict(settings)}
    chunks = [(b.index.tolist(), b.tolist()) for b in batches]
    failed = ray_driver.run_chunks(chunks, job, options,
                                    lambda c, rows: commit(rows["id"], rows[["score", "n_tokens", "truncated"]].copy()))
    if not failed:
        return ""
    n = sum(len(chunks[c][0]) for c in failed)
    return (f"{n} of {sum(map(len, batches))} snippets failed on the Ray workers after {1 + options.retries} attempts "
            f"(first error: {next(iter(failed.values()))}); the others are stored, run the job again to retry these")


def audit_task(lm: LanguageModel, texts: list[str], job: dict) -> pd.DataFrame:
    """The Ray workers' task: snippet scores exactly as the local path computes them (`score_snippets`)."""
    return score_snippets(lm, texts, AuditSettings(**job["settings"]))


def audit_failed_rows(n: int) -> pd.DataFrame:
    """The rows of a failed chunk of snippets: no score."""
    return pd.DataFrame({"score": np.full(n, np.nan), "n_tokens": np.zeros(n, np.int64), "truncated": np.zeros(n, bool)})


def score_snippets(lm: LanguageModel, texts: list[str], settings: AuditSettings) -> pd.DataFrame:
    """Scores of snippet texts (columns score, n_tokens, truncated), each truncated to the model's context: one
    pass through scoring (and one of the model) per batch."""
    params = dict(settings.params)
    k = params.pop("k", 0.2)
    df = score_table(lm, texts, [settings.method], k=k, bos=settings.bos, long_text="truncate", **params)
    return pd.DataFrame({"score": df[settings.method].to_numpy(dtype=float),
                         "n_tokens": df["n_tokens"].to_numpy(),
                         "truncated": (df["long_text"] == "truncated").to_numpy()})


def audit_result(store: ResultsStore, run_id: str, settings: AuditSettings | None = None) -> AuditResult:
    """Calibrate and analyse a fully scored run (analysis settings from `settings`, else the run's own).

    Reads keys and scores only; the run's stored config is never rewritten (a first analysis marks a
    scored run "done").
    """
    run = store.run(run_id)
    stored = AuditSettings(**run["config"])
    if settings is None:
        settings = stored
    elif settings.scoring_key() != stored.scoring_key():
        raise ValueError(f"run {run_id} was scored with {stored.scoring_key()}, not {settings.scoring_key()}")
    snippets = store.results(run_id)
    if snippets.empty:
        raise ValueError(f"run {run_id} has no snippets (it was never fully planned); plan it again")
    missing = int(snippets["score"].isna().sum())
    if missing:
        raise ValueError(f"run {run_id} is not finished: {missing} of {len(snippets)} snippets have no score yet")
    cal_rows = snippets[snippets["role"] == "calibration"]
    calibration = calibrate(cal_rows["score"], cal_rows["label"].astype(int), cal_rows["book"], rule=settings.rule,
                            target_fpr=settings.target_fpr, n_boot=settings.n_boot, seed=settings.seed, ci=settings.ci)
    audit_rows = snippets[snippets["role"] == "audit"]
    books = analyse_books(calibration, audit_rows)
    snippets = snippets.assign(flagged=snippets["score"] >= calibration.threshold)
    if run["status"] == "scored":
        store.set_status(run_id, "done", f"{len(snippets)} snippets scored and analysed")
    return AuditResult(store.run(run_id), settings, calibration, books, snippets, store.problems(run_id), store)


def run_audit(model: ModelRef, books: Iterable[Book | Problem], calibration: Iterable[Book | Problem],
              settings: AuditSettings,
              store: ResultsStore, *, lm: LanguageModel | None = None, problems: list[Problem | tuple] = (),
              run_id: str | None = None, progress: Progress | None = None, backend: str = "local",
              ray_address: str | None = None, ray_options: RayOptions | None = None) -> AuditResult:
    """Plan (or resume), score what is pending (locally or on Ray), and analyse: the whole audit in one call.

    lm : `model` already loaded here; else it is loaded (on the CPU with Ray, whose workers load their own).
    """
    if lm is None:
        lm = model.load() if backend == "local" else ModelRef(model.spec, model.options.on_cpu()).load()
    rows = problem_rows(list(problems), "audit")
    run_id = plan_audit(store, model, books, calibration, settings, rows, lm=lm, run_id=run_id, backend=backend)
    run_scoring(store, run_id, model, lm=lm, progress=progress, backend=backend, ray_address=ray_address,
                ray_options=ray_options)
    return audit_result(store, run_id, settings)

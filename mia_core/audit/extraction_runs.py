"""A book audit's extraction pass as a run in the results store: planned into units of windows, computed unit by
unit (in this process or by Ray model actors) with each unit committed as it finishes, then read back into the
per-book figures (`audit.extraction`).

The run's id is derived from everything its numbers depend on (the model's fingerprint, the extraction settings, the
unit size, every book's name, role and text) and the audit it accompanies, so running the same extraction again
resumes it: only units without a stored result are computed. A killed run loses at most the units in flight; two processes on one run split its
units through claims (`runs.claims`). Units and why they are not single windows: `runs.extraction_units`.
"""
from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from ..extract import ExtractionSettings
from ..extract.result import ExtractionResult, window_table
from ..extract.run import CACHE_VERSION, fed_log10_pz
from ..extract.windows import WindowLayout, layout_text
from ..model.identity import text_sha256
from ..model.language_model import LanguageModel
from ..model.options import ModelRef
from ..runs import ray_driver
from ..runs.backends import check_backend
from ..runs.extraction_units import KIND, UNIT_WINDOWS, ExtractionUnits, unit_rows
from ..runs.ray_driver import RayOptions
from ..runs.store import SNIPPET_COLUMNS, ResultsStore, RunRecord
from ..version import code_version
from .batches import compute_claimed, run_claimed
from .extraction import ExtractionEvidence, book_row, strip
from .sources import AuditInputs, Book

#: The label recorded for each role of an extraction book (calibration books keep theirs; audited books have none).
ROLE_LABELS = {"audited": None, "calibration member": 1, "calibration non-member": 0}
#: Units claimed and computed together by this process (each committed as it finishes); a Ray pass gets them all.
LOCAL_CLAIM_UNITS = 4
Books = Callable[[], Iterable[tuple[str, str, str]]]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class UnitWork:
    """One unit's windows as a worker computes them: the token ids they span, each one's start, the lead token."""

    ids: np.ndarray
    starts: np.ndarray
    lead: int | None

    def fed(self, settings: ExtractionSettings) -> np.ndarray:
        """(windows, fed width) int64: what the model is fed for each window."""
        layout = WindowLayout(self.ids, np.empty((0, 2), np.int64), self.starts, self.lead, settings)
        return layout.fed(np.arange(len(self.starts)))

    def to_text(self) -> str:
        """The unit as a JSON string (what a Ray chunk carries)."""
        return json.dumps({"ids": self.ids.tolist(), "starts": self.starts.tolist(), "lead": self.lead})

    @staticmethod
    def from_text(text: str) -> "UnitWork":
        found = json.loads(text)
        return UnitWork(np.asarray(found["ids"], np.int64), np.asarray(found["starts"], np.int64), found["lead"])


def extraction_books(inputs: AuditInputs) -> Iterator[tuple[str, str, str]]:
    """(name, role, text) of every audited, then every calibration book, read one at a time (`ROLE_LABELS`' roles)."""
    roles = {label: role for role, label in ROLE_LABELS.items()}
    for source in (inputs.books, inputs.calibration):
        for book in source:
            if isinstance(book, Book):
                yield book.name, roles[book.label], book.text


def unit_log10_pz(lm: LanguageModel, work: UnitWork, settings: ExtractionSettings) -> tuple[np.ndarray, np.ndarray]:
    """(log10 p_z, greedy) of a unit's windows: the extraction pass over them, or a served model's server
    (`extract.run.fed_log10_pz`, as `extract_texts`)."""
    return fed_log10_pz(lm, work.fed(settings), settings, 0 if work.lead is None else 1)


def plan_extraction(store: ResultsStore, model: ModelRef, lm: LanguageModel, books: Books,
                    settings: ExtractionSettings, *, audit_run: str | None = None, backend: str = "local") -> str:
    """Write the run and its units to the store (unless it is there with the same plan); return its id.

    books : a callable giving (name, role, text) of each book (role one of `ROLE_LABELS`), called twice: once to
        hash the texts (the run's id), once to tokenise each book and store its units, one book at a time.
    audit_run : the book-audit run it accompanies (part of its id, and recorded, so a page finds it: another audit
        of the same books has an extraction of its own).
    """
    check_backend(backend)
    key = [lm.fingerprint, CACHE_VERSION, settings.key(), UNIT_WINDOWS, audit_run]
    digest = hashlib.sha256(json.dumps(key).encode())
    for name, role, text in books():
        digest.update(json.dumps([name, role, text_sha256(text)]).encode())
    run_id = f"x-{digest.hexdigest()[:12]}"
    plan = {"model": lm.fingerprint, "settings": settings.as_dict(), "unit_windows": UNIT_WINDOWS,
            "books": digest.hexdigest()}
    units = ExtractionUnits(store.path)
    exists, _ = store.stored_plan(run_id)
    lead = None
    if not exists:
        units.clear_unplanned(run_id)
        for position, (name, role, text) in enumerate(books()):
            layout = layout_text(lm, text, settings)
            if layout.fed_width > lm.max_length:
                raise ValueError(f"an extraction window is {layout.fed_width} tokens fed, more than {lm.name}'s "
                                 f"context of {lm.max_length}: shorten the prefix or suffix")
            lead = layout.lead
            units.add_book(run_id, {"book": name, "role": role, "label": ROLE_LABELS[role], "position": position,
                                    "n_text_tokens": len(layout.ids), "text": text},
                           unit_rows(name, layout.starts, layout.ids, layout.spans(), settings.window))
        if lead is None:  # no book: the lead token from an empty text
            lead = layout_text(lm, "", settings).lead
    else:
        lead = store.run(run_id)["config"]["lead"]
    config = {"audit_run": audit_run, "settings": settings.as_dict(), "lead": lead}
    store.plan_run(RunRecord(run_id, KIND, model.spec, lm.fingerprint, "extraction", settings.as_dict(), 0,
                             code_version(), backend, config), plan, pd.DataFrame(columns=SNIPPET_COLUMNS), [])
    return run_id


def run_extraction(store: ResultsStore, run_id: str, model: ModelRef, *, lm: LanguageModel | None = None,
                   progress: Progress | None = None, backend: str = "local", ray_address: str | None = None,
                   ray_options: RayOptions | None = None) -> int:
    """Compute every pending unit of the run, committing each as it finishes; returns how many were computed now.

    backend : "local" (this process, `lm` or `model` loaded here) or "ray" (model actors, each loading `model` and
        checking its fingerprint against the run's). progress(units done, units planned).
    Raises `WorkerError` when Ray chunks still fail after their retry (what finished stays stored).
    """
    check_backend(backend)
    run = store.run(run_id)
    settings, lead = ExtractionSettings(**run["config"]["settings"]), run["config"]["lead"]
    if backend == "local":
        lm = lm if lm is not None else model.load()
        if run["fingerprint"] != lm.fingerprint:
            raise ValueError(f"extraction run {run_id} was computed with model {run['model']} (fingerprint "
                             f"{run['fingerprint']}); the loaded model has fingerprint {lm.fingerprint}")
    units = ExtractionUnits(store.path)
    done, total = units.progress(run_id)
    store.set_status(run_id, "running", f"{done} of {total} extraction units computed", backend=backend, owner=True)
    session, written = uuid.uuid4().hex[:12], 0

    def commit(unit_id: str, log10_pz: np.ndarray, greedy: np.ndarray) -> None:
        nonlocal written
        units.write_result(run_id, unit_id, log10_pz, greedy, session)
        written += 1
        if progress:
            progress(done + written, total)

    def compute(ids: list[str]) -> str:
        works = [UnitWork(w["ids"], w["starts"], lead) for w in units.work(run_id, ids)]
        if backend == "ray":
            return _compute_on_ray(run, model, ids, works, settings, commit, ray_address, ray_options)
        for unit_id, work in zip(ids, works):
            commit(unit_id, *unit_log10_pz(lm, work, settings))
        return ""

    sizes = None if backend == "ray" else iter(lambda: LOCAL_CLAIM_UNITS, None)
    run_claimed(store, run_id, lambda: compute_claimed(lambda: units.pending_ids(run_id),
                                                       lambda ids: units.claim(run_id, session, ids), sizes, compute),
                lambda: units.release(run_id, session), f"{total} of {total} extraction units computed")
    return written


def _compute_on_ray(run: dict, model: ModelRef, ids: list[str], works: list[UnitWork], settings: ExtractionSettings,
                    commit, address: str | None, options: RayOptions | None) -> str:
    """Compute the units on Ray model actors (one unit a chunk), committing each as it streams back; a message if some
    still failed."""
    options = ray_driver.resolve_options(address, options)
    job = {"task": extraction_task, "failed_rows": extraction_failed_rows, "model": model.portable(),
           "fingerprint": run["fingerprint"], "settings": settings.as_dict()}
    chunks = [([unit_id], [work.to_text()]) for unit_id, work in zip(ids, works)]

    def collect(chunk: int, rows: pd.DataFrame) -> None:
        for unit_id, payload in zip(rows["id"], rows["payload"]):
            found = json.loads(payload)
            commit(str(unit_id), np.asarray(found["log10_pz"], np.float64), np.asarray(found["greedy"], bool))

    failed = ray_driver.run_chunks(chunks, job, options, collect)
    if not failed:
        return ""
    return (f"{len(failed)} of {len(chunks)} extraction units failed on the Ray workers after {1 + options.retries} "
            f"attempts (first error: {next(iter(failed.values()))}); the others are stored, run it again to retry "
            "these")


def extraction_task(lm: LanguageModel, texts: list[str], job: dict) -> pd.DataFrame:
    """The Ray workers' task: each unit's log10 p_z and greedy flags exactly as the local path computes them (JSON:
    float64 values round-trip exactly, −inf as -Infinity)."""
    settings = ExtractionSettings(**job["settings"])
    payloads = []
    for text in texts:
        log10_pz, greedy = unit_log10_pz(lm, UnitWork.from_text(text), settings)
        payloads.append(json.dumps({"log10_pz": log10_pz.tolist(), "greedy": greedy.tolist()}))
    return pd.DataFrame({"payload": np.array(payloads, dtype=object)})


def extraction_failed_rows(n: int) -> pd.DataFrame:
    """The rows of a failed chunk of units: no result."""
    return pd.DataFrame({"payload": np.array([""] * n, dtype=object)})


def extraction_result(store: ResultsStore, run_id: str, *, ci: float = 0.95) -> ExtractionEvidence:
    """The per-book figures of a finished extraction run (`audit.extraction.book_row` and strip per book); a first
    read marks a computed run "done"."""
    run = store.run(run_id)
    settings = ExtractionSettings(**run["config"]["settings"])
    units = ExtractionUnits(store.path)
    done, total = units.progress(run_id)
    if done < total:
        raise ValueError(f"extraction run {run_id} is not finished: {total - done} of {total} units have no result yet")
    rows, strips = [], {}
    for book in units.books(run_id).itertuples():
        spans, log10_pz, greedy, _ = units.book_windows(run_id, book.book)
        if not len(log10_pz):
            spans = {name: np.empty(0, np.int64) for name in ("token_start", "char_start", "suffix_char_start",
                                                               "char_end")}
        result = ExtractionResult(book.text, settings, window_table(spans, settings, log10_pz, greedy),
                                  int(book.n_text_tokens))
        rows.append({**book_row(book.book, result, ci), "role": book.role})
        strips[book.book] = strip(result)
    if run["status"] == "scored":
        store.set_status(run_id, "done", f"{total} extraction units computed and read")
    return ExtractionEvidence(settings, pd.DataFrame(rows), strips)


def book_extraction(store: ResultsStore, model: ModelRef, lm: LanguageModel, books: Books,
                    settings: ExtractionSettings, *, audit_run: str | None = None, ci: float = 0.95,
                    progress: Progress | None = None, backend: str = "local", ray_address: str | None = None,
                    ray_options: RayOptions | None = None) -> ExtractionEvidence:
    """Plan (or resume), compute what is pending (locally or on Ray) and read the figures: the whole pass at once."""
    run_id = plan_extraction(store, model, lm, books, settings, audit_run=audit_run, backend=backend)
    run_extraction(store, run_id, model, lm=lm, progress=progress, backend=backend, ray_address=ray_address,
                   ray_options=ray_options)
    return extraction_result(store, run_id, ci=ci)

"""Planning a book audit: its books read one at a time, cut into snippets, staged, hashed, and written to the store.

A job's id is derived from everything that determines its scores (model fingerprint, method, parameters, BOS
policy, snippet size, every snippet's text), so running the same audit again resumes it. The same things, hashed,
are the run's plan: a job named with `run_id` whose stored plan differs is refused, never resumed with other
texts. Books are read from their sources as the plan is made (`sources.BookStream`) and their snippets staged on
disk (`staging.SnippetStage`), so planning holds one book's text and its snippets, never the whole source's.
"""
from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Iterable

import pandas as pd

from ..model.identity import text_sha256
from ..names import shown_message, shown_name
from ..model.language_model import LanguageModel
from ..model.options import ModelRef
from ..runs.backends import check_backend
from ..runs.store import PlanMismatch, ResultsStore, RunRecord, plan_difference
from ..version import code_version
from .settings import KIND, AuditSettings
from .snippets import one_book
from .sources import Book, Problem
from .staging import SnippetStage

ROLES = ("calibration", "audit")


def plan_audit(store: ResultsStore, model: ModelRef, books: Iterable[Book | Problem],
               calibration: Iterable[Book | Problem], settings: AuditSettings, problems: list[tuple[str, str, str]] = (),
               *, lm: LanguageModel, run_id: str | None = None, backend: str = "local") -> str:
    """Read the books and write the run and its snippets to the store, whole or not at all (unless already there);
    return the run id.

    `books` and `calibration` are lists of books or opened sources (`sources.open_books`), read here one book at a
    time; the problems they yield are stored with the run. `model` is the run's model (its spec is recorded), `lm`
    that model loaded here (its fingerprint names the run). `problems` are (book, role, message) rows found before;
    books too short for one snippet are added to them. Calibration books keep their labels; audited books are
    unlabelled. A run named `run_id` that exists with another plan (model, scoring settings, texts) is refused
    with a ValueError naming what changed; with the same plan it is resumed.
    """
    check_backend(backend)
    scoring = json.loads(json.dumps(settings.scoring_key(), sort_keys=True, default=str))
    digest = hashlib.sha256(json.dumps([lm.fingerprint, settings.scoring_key()], sort_keys=True, default=str).encode())
    with tempfile.TemporaryDirectory(prefix=".mia-plan-", dir=store.path.parent) as folder, \
            SnippetStage(Path(folder), digest) as stage:
        read, short, classes = _stage_books(stage, {"calibration": calibration, "audit": books}, settings)
        if classes != {0, 1}:
            raise ValueError("the calibration books give no snippets of one class (too short for "
                             f"{settings.snippet_words}-word snippets?); it needs known members and known non-members")
        if not stage.counts["audit"]:
            raise ValueError(f"no book to audit is at least {settings.snippet_words} words long")
        run_id = run_id or stage.run_digest.hexdigest()[:12]
        plan = {"model": lm.fingerprint, "scoring": scoring, **{f"{role} books": stage.role_hash(role) for role in ROLES}}
        exists, stored = store.stored_plan(run_id)
        if exists and stored is None:  # stored before plans were kept: its plan, from its stored snippets
            stored = _stored_run_plan(store, run_id)
            if stored != plan:
                raise PlanMismatch(plan_difference(run_id, stored, plan))
        store.plan_run(RunRecord(run_id, KIND, model.spec, lm.fingerprint, settings.method, settings.params,
                                 settings.seed, code_version(), backend, asdict(settings)), plan, stage.frames(),
                       stored_problems(list(problems) + read + short))
    return run_id


def stored_problems(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(book, role, message) rows as the store keeps them, for every reader (page, report, CSV, PDF, CLI): hidden
    characters escaped, a dashboard's upload folder cut from paths (`names.shown_message`)."""
    return [(shown_name(str(book)), role, shown_message(message)) for book, role, message in rows]


def _stage_books(stage: SnippetStage, sources: dict[str, Iterable[Book | Problem]],
                 settings: AuditSettings) -> tuple[list[tuple], list[tuple], set]:
    """Cut each role's books into snippets as they are read and stage them: (problems of reading, problems of books
    too short for one snippet, the labels of the calibration books that gave snippets)."""
    read, short, classes, calibration_names = [], [], set(), set()
    for role, items in sources.items():
        for item in items:
            if isinstance(item, Problem):
                read.append((item.book, role, item.message))
                continue
            if role == "calibration":
                calibration_names.add(item.name)
            elif item.name in calibration_names:  # its snippet ids would be a calibration book's
                read.append((item.name, role, f"{item.name}: a calibration book has the same name; not audited "
                                              "(rename one of them)"))
                continue
            snippets = one_book(item, settings.snippet_words, settings.max_snippets_per_book)
            if isinstance(snippets, Problem):
                short.append((snippets.book, role, snippets.message))
            else:
                label = item.label if role == "calibration" else None
                if role == "calibration":
                    classes.add(label)
                stage.add(role, label, snippets)
            del item, snippets  # the book's text is not held while the next one is read
    return read, short, classes


def audit_plan(fingerprint: str, settings: AuditSettings, frame: pd.DataFrame) -> dict:
    """What a run's scores depend on: the model, the scoring settings, and a hash of each role's snippets (a frame
    with columns snippet_id, role, label, text; `SnippetStage.role_hash` computes the same from staged snippets)."""
    plan = {"model": fingerprint, "scoring": json.loads(json.dumps(settings.scoring_key(), sort_keys=True, default=str))}
    for role in ROLES:
        digest = hashlib.sha256()
        for row in frame[frame["role"] == role].sort_values("snippet_id").itertuples():
            label = "" if pd.isna(row.label) else int(row.label)
            digest.update(f"{row.snippet_id}\t{label}\t{text_sha256(row.text)}\n".encode())
        plan[f"{role} books"] = digest.hexdigest()
    return plan


def _stored_run_plan(store: ResultsStore, run_id: str) -> dict:
    """The plan of a stored run, recomputed from its row and its stored snippets."""
    run = store.run(run_id)
    frame = store.results(run_id)[["snippet_id", "role", "label"]]
    frame = frame.assign(text=store.snippet_texts(run_id, frame["snippet_id"]).to_numpy())
    return audit_plan(run["fingerprint"], AuditSettings(**run["config"]), frame)

"""The results store: an embedded DuckDB file that every finished snippet score is written to at once.

Runs (jobs) are rows of `runs`; their planned snippets are rows of `snippets`; every score is a row
of `scores` committed as soon as its batch finishes, so a killed process loses at most the batch in
flight and a restart recomputes nothing that is stored. Connections are opened per operation, so
a dashboard can read a store while a CLI job (another process) writes to it; a locked file is
retried briefly.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd

from ..paths import cache_root

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, kind VARCHAR, created_at TIMESTAMP, updated_at TIMESTAMP, status VARCHAR,
    message VARCHAR, model VARCHAR, fingerprint VARCHAR, method VARCHAR, params VARCHAR, seed INTEGER,
    code_version VARCHAR, backend VARCHAR, config VARCHAR);
CREATE TABLE IF NOT EXISTS snippets (
    run_id VARCHAR, snippet_id VARCHAR, book VARCHAR, role VARCHAR, label INTEGER, position INTEGER,
    n_words INTEGER, text VARCHAR, PRIMARY KEY (run_id, snippet_id));
CREATE TABLE IF NOT EXISTS scores (
    run_id VARCHAR, snippet_id VARCHAR, score DOUBLE, n_tokens INTEGER, truncated BOOLEAN,
    fingerprint VARCHAR, method VARCHAR, params VARCHAR, code_version VARCHAR, session VARCHAR,
    computed_at TIMESTAMP, PRIMARY KEY (run_id, snippet_id));
CREATE TABLE IF NOT EXISTS problems (run_id VARCHAR, book VARCHAR, role VARCHAR, message VARCHAR);
"""
SNIPPET_COLUMNS = ["snippet_id", "book", "role", "label", "position", "n_words", "text"]
SCORE_COLUMNS = ["snippet_id", "score", "n_tokens", "truncated"]
#: How long to keep retrying when another process holds the file.
LOCK_WAIT_S = 30.0


def default_store_path() -> Path:
    """The shared store (the dashboard and the CLI both default to it): `$MIA_LENS_STORE`, else in the cache."""
    env = os.environ.get("MIA_LENS_STORE")
    return Path(env).expanduser() if env else cache_root() / "results.duckdb"


@dataclass(frozen=True)
class RunRecord:
    """What a run is: its id, kind (e.g. "book-audit"), model, method, parameters, seed, code version, backend."""

    run_id: str
    kind: str
    model: str
    fingerprint: str
    method: str
    params: dict
    seed: int
    code_version: str
    backend: str
    config: dict


class ResultsStore:
    """A DuckDB results file; every method opens, does one thing, commits and closes."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            con.execute(SCHEMA)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection, retried while another process holds the file's lock.

        Within a process, operations on one file are serialised (DuckDB refuses two threads attaching
        the same file at once, e.g. a background job writing while a page reads); always read-write,
        since DuckDB also refuses mixed read-only/read-write connections to one file in a process.
        """
        with _process_lock(self.path):
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    con = duckdb.connect(str(self.path))
                    break
                except duckdb.IOException as err:
                    if "lock" not in str(err).lower() or time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            try:
                yield con
            finally:
                con.close()

    # runs ---------------------------------------------------------------------------------------
    def create_run(self, run: RunRecord) -> bool:
        """Insert the run if it is new; True if created, False if it already existed (resume)."""
        now = _now()
        with self._connect() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run.run_id]).fetchone():
                return False
            con.execute("INSERT INTO runs VALUES (?, ?, ?, ?, 'created', '', ?, ?, ?, ?, ?, ?, ?, ?)",
                        [run.run_id, run.kind, now, now, run.model, run.fingerprint, run.method, _json(run.params),
                         run.seed, run.code_version, run.backend, _json(run.config)])
            return True

    def run(self, run_id: str) -> dict:
        """The run's row as a dict (params and config parsed); KeyError if there is no such run."""
        with self._connect() as con:
            df = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
        if df.empty:
            raise KeyError(f"no run {run_id!r} in {self.path}")
        row = df.iloc[0].to_dict()
        row["params"], row["config"] = json.loads(row["params"]), json.loads(row["config"])
        return row

    def runs(self, kind: str | None = None) -> pd.DataFrame:
        """Every run (newest first) with its progress: snippets planned and scored."""
        query = """SELECT r.run_id, r.kind, r.status, r.message, r.model, r.method, r.backend, r.created_at, r.updated_at,
                          (SELECT count(*) FROM snippets s WHERE s.run_id = r.run_id) AS n_snippets,
                          (SELECT count(*) FROM scores c WHERE c.run_id = r.run_id) AS n_scored
                   FROM runs r {} ORDER BY r.created_at DESC"""
        with self._connect() as con:
            if kind:
                return con.execute(query.format("WHERE r.kind = ?"), [kind]).df()
            return con.execute(query.format("")).df()

    def set_status(self, run_id: str, status: str, message: str = "", *, backend: str | None = None,
                   config: dict | None = None) -> None:
        """Record the run's state (created, running, done, failed) with a message, backend and latest config."""
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, message = ?, updated_at = ? WHERE run_id = ?",
                        [status, message, _now(), run_id])
            if backend is not None:
                con.execute("UPDATE runs SET backend = ? WHERE run_id = ?", [backend, run_id])
            if config is not None:
                con.execute("UPDATE runs SET config = ? WHERE run_id = ?", [_json(config), run_id])

    # snippets and problems ----------------------------------------------------------------------
    def add_snippets(self, run_id: str, snippets: pd.DataFrame) -> None:
        """Plan the run's snippets (columns `SNIPPET_COLUMNS`); ids already planned are left as they are."""
        frame = snippets[SNIPPET_COLUMNS].copy()
        frame.insert(0, "run_id", run_id)
        with self._connect() as con:
            con.register("incoming", frame)
            con.execute("INSERT INTO snippets SELECT * FROM incoming i WHERE NOT EXISTS "
                        "(SELECT 1 FROM snippets s WHERE s.run_id = i.run_id AND s.snippet_id = i.snippet_id)")

    def add_problems(self, run_id: str, problems: list[tuple[str, str, str]]) -> None:
        """Replace the run's list of (book, role, message) problems."""
        with self._connect() as con:
            con.execute("DELETE FROM problems WHERE run_id = ?", [run_id])
            if problems:
                con.executemany("INSERT INTO problems VALUES (?, ?, ?, ?)", [[run_id, *p] for p in problems])

    def problems(self, run_id: str) -> pd.DataFrame:
        with self._connect() as con:
            return con.execute("SELECT book, role, message FROM problems WHERE run_id = ?", [run_id]).df()

    def pending(self, run_id: str) -> pd.DataFrame:
        """Planned snippets without a stored score, in plan order (book, position)."""
        with self._connect() as con:
            return con.execute("""SELECT s.* EXCLUDE (run_id) FROM snippets s WHERE s.run_id = ? AND NOT EXISTS
                                  (SELECT 1 FROM scores c WHERE c.run_id = s.run_id AND c.snippet_id = s.snippet_id)
                                  ORDER BY s.role, s.book, s.position""", [run_id]).df()

    # scores -------------------------------------------------------------------------------------
    def write_scores(self, run_id: str, scores: pd.DataFrame, *, fingerprint: str, method: str, params: dict,
                     code_version: str, session: str) -> None:
        """Commit finished scores (columns `SCORE_COLUMNS`); a score already stored is never overwritten."""
        frame = scores[SCORE_COLUMNS].copy()
        frame.insert(0, "run_id", run_id)
        for name, value in (("fingerprint", fingerprint), ("method", method), ("params", _json(params)),
                            ("code_version", code_version), ("session", session), ("computed_at", _now())):
            frame[name] = value
        with self._connect() as con:
            con.register("incoming", frame)
            con.execute("INSERT INTO scores SELECT * FROM incoming i WHERE NOT EXISTS "
                        "(SELECT 1 FROM scores c WHERE c.run_id = i.run_id AND c.snippet_id = i.snippet_id)")

    def results(self, run_id: str) -> pd.DataFrame:
        """Every planned snippet with its score (NaN if not scored yet) and when/by which session it was scored."""
        with self._connect() as con:
            return con.execute("""SELECT s.snippet_id, s.book, s.role, s.label, s.position, s.n_words, s.text,
                                         c.score, c.n_tokens, c.truncated, c.session, c.computed_at
                                  FROM snippets s LEFT JOIN scores c USING (run_id, snippet_id)
                                  WHERE s.run_id = ? ORDER BY s.role, s.book, s.position""", [run_id]).df()

    def progress(self, run_id: str) -> tuple[int, int]:
        """(scored, planned) snippet counts of a run."""
        with self._connect() as con:
            planned = con.execute("SELECT count(*) FROM snippets WHERE run_id = ?", [run_id]).fetchone()[0]
            scored = con.execute("SELECT count(*) FROM scores WHERE run_id = ?", [run_id]).fetchone()[0]
        return int(scored), int(planned)


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _process_lock(path: Path) -> threading.RLock:
    """One lock per store file in this process."""
    key = str(path.resolve())
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.RLock())


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)

"""The results store: an embedded DuckDB file that every finished snippet score is written to at once.

Runs (jobs) are rows of `runs`; their planned snippets are rows of `snippets`; every score is a row
of `scores` committed as soon as its batch finishes, so a killed process loses at most the batch in
flight and a restart recomputes nothing that is stored. A run is planned whole or not at all: its
snippets are committed in chunks, then its row (with its plan hash) and problems in one last
transaction, so no run exists with part of its snippets (`plan_run`); and a scoring process
records its pid, host and a heartbeat per batch, so a run whose process is gone is shown as
interrupted, not running (`run_status`). Reading a run never writes to it. The file, its schema, connections and chunked
reads are `store_db`'s.
"""
from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import duckdb
import pandas as pd

from ..paths import cache_root
from . import claims
from .run_status import (
    HOST, STALE_HEARTBEAT_S, PlanMismatch, RunProgress, live_messages, pid_alive, plan_difference, shown_status,
)
from .store_db import (LOCK_WAIT_S, MEMORY_LIMIT, READ_MEMORY_LIMIT, SCHEMA, StoreUnreadable, check_blocks,
                       check_schema, connect, fetch_frame, now, to_json, transaction)
from .store_db import insert_missing as _insert_missing  # a module global: a test kills the process inside it

__all__ = ["HOST", "LOCK_WAIT_S", "MEMORY_LIMIT", "POINT_LOOKUPS", "SCORE_COLUMNS", "SNIPPET_COLUMNS",
           "STALE_HEARTBEAT_S", "PlanMismatch", "ResultsStore", "RunProgress", "RunRecord", "StoreUnreadable",
           "default_store_path",
           "pid_alive", "plan_difference"]

SNIPPET_COLUMNS = ["snippet_id", "book", "role", "label", "position", "n_words", "text"]
SCORE_COLUMNS = ["snippet_id", "score", "n_tokens", "truncated"]
#: Planned snippets committed together while a new run is written: about 30 MB of 512-word texts, which DuckDB holds
#: in memory until they are committed (in one transaction, the snippets of a 2 GB source took 2.5 GB, past its limit).
PLAN_COMMIT_ROWS = 10_000
#: Up to this many texts are fetched one id at a time (a filtered lookup reads only those rows); more, by one scan.
POINT_LOOKUPS = 256


def default_store_path() -> Path:
    """The shared store (the dashboard and the CLI both default to it): `$MIA_LENS_STORE`, else in the cache."""
    env = os.environ.get("MIA_LENS_STORE")
    return Path(env).expanduser() if env else cache_root() / "results.duckdb"


def _stored_plan_row(con: duckdb.DuckDBPyConnection, run_id: str, plan: dict) -> tuple | None:
    """The run's (plan,) row, None when it is not stored; `PlanMismatch` when its stored plan is another."""
    rows = con.execute("SELECT plan FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if rows and rows[0][0] is not None and json.loads(rows[0][0]) != json.loads(to_json(plan)):
        raise PlanMismatch(plan_difference(run_id, json.loads(rows[0][0]), json.loads(to_json(plan))))
    return rows[0] if rows else None


def _insert_committing(con: duckdb.DuckDBPyConnection, chunks: Iterable[pd.DataFrame], run_id: str) -> None:
    """Insert the chunks' snippets, committing every `PLAN_COMMIT_ROWS` rows or so."""
    held = 0
    con.execute("BEGIN TRANSACTION")
    try:
        for chunk in chunks:
            _insert_missing(con, "snippets", _keyed(chunk, run_id))
            held += len(chunk)
            if held >= PLAN_COMMIT_ROWS:
                con.execute("COMMIT")
                con.execute("BEGIN TRANSACTION")
                held = 0
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _keyed(chunk: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """A chunk of planned snippets as rows of the `snippets` table (`run_id` first)."""
    frame = chunk[SNIPPET_COLUMNS].copy()
    frame.insert(0, "run_id", run_id)
    return frame


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
    """A DuckDB results file; every method opens, does one thing, commits and closes.

    Opening it reads the whole file once: a file that is not a store, or a damaged one (truncated, a block
    overwritten), is a `StoreUnreadable` here, left as it was, not an error on a later page or write.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            check_schema(con, self.path)
            check_blocks(con, self.path)
            con.execute(SCHEMA + claims.SCHEMA)

    def _connect(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection to this store (`store_db.connect`: locked, memory-capped, damage named as a ValueError)."""
        return connect(self.path)

    # runs ---------------------------------------------------------------------------------------
    def plan_run(self, run: RunRecord, plan: dict, snippets: pd.DataFrame | Iterable[pd.DataFrame],
                 problems: list[tuple[str, str, str]]) -> bool:
        """Write the run, its plan, snippets (`SNIPPET_COLUMNS`; a frame, or frames a chunk at a time) and (book, role,
        message) problems; the run exists only once all of them are stored.

        True if the run was created, False if it existed with the same plan (resume; its snippets
        stay as they are). `PlanMismatch` names what differs when it exists with another plan; a
        run stored before plans were kept (plan NULL) must be checked by the caller, and gets `plan`.
        A new run's snippets are committed `PLAN_COMMIT_ROWS` at a time (DuckDB holds what is not
        committed in memory, past its limit: 2.5 GB for a 2 GB source at once), then its row and
        problems in one last transaction, on one connection (no other process opens the file
        meanwhile). Snippets of a run id without a row (a planning killed before its end) are
        removed when that run is planned again.
        """
        chunks = [snippets] if isinstance(snippets, pd.DataFrame) else snippets
        with self._connect() as con:
            with transaction(con):
                new = _stored_plan_row(con, run.run_id, plan) is None
                if new:
                    con.execute("DELETE FROM snippets WHERE run_id = ?", [run.run_id])
            if new:
                _insert_committing(con, chunks, run.run_id)
            with transaction(con):
                row = _stored_plan_row(con, run.run_id, plan)
                self._write_run(con, run, plan, row, problems)
                for chunk in () if new else chunks:  # a resumed run: anything missing, with its row
                    _insert_missing(con, "snippets", _keyed(chunk, run.run_id))
        return new

    @staticmethod
    def _write_run(con: duckdb.DuckDBPyConnection, run: RunRecord, plan: dict, row: tuple | None,
                   problems: list[tuple[str, str, str]]) -> None:
        """The run's row (new, or its plan set when it had none) and its problems (replacing any stored)."""
        stamp = now()
        if row is None:
            con.execute("""INSERT INTO runs (run_id, kind, created_at, updated_at, status, message, model, fingerprint,
                                             method, params, seed, code_version, backend, config, plan)
                           VALUES (?, ?, ?, ?, 'created', '', ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                        [run.run_id, run.kind, stamp, stamp, run.model, run.fingerprint, run.method, to_json(run.params),
                         run.seed, run.code_version, run.backend, to_json(run.config), to_json(plan)])
        elif row[0] is None:
            con.execute("UPDATE runs SET plan = ? WHERE run_id = ?", [to_json(plan), run.run_id])
        con.execute("DELETE FROM problems WHERE run_id = ?", [run.run_id])
        con.register("new_problems", pd.DataFrame([[run.run_id, *p] for p in problems],
                                                  columns=["run_id", "book", "role", "message"]))
        con.execute("INSERT INTO problems SELECT * FROM new_problems")

    def stored_plan(self, run_id: str) -> tuple[bool, dict | None]:
        """(whether the run exists, its plan or None when it was stored before plans were kept)."""
        with self._connect() as con:
            row = con.execute("SELECT plan FROM runs WHERE run_id = ?", [run_id]).fetchone()
        return (row is not None, json.loads(row[0]) if row is not None and row[0] is not None else None)

    def run(self, run_id: str) -> dict:
        """The run's row as a dict (params and config parsed; status as shown, see `runs`); KeyError if none."""
        with self._connect() as con:
            df = con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]).df()
        if df.empty:
            raise KeyError(f"no run {run_id!r} in {self.path}")
        row = shown_status(df).iloc[0].to_dict()
        row["params"], row["config"] = json.loads(row["params"]), json.loads(row["config"])
        return row

    def runs(self, kind: str | None = None) -> pd.DataFrame:
        """Every run (newest first) with its progress: snippets planned and scored.

        A run stored as "running" whose process is gone (pid not alive on this host, or no heartbeat for
        `STALE_HEARTBEAT_S`) is shown as "interrupted" with how to resume it; a running run's message counts its
        scores now (`live_messages`); the store is not changed.
        """
        query = """WITH planned AS (SELECT run_id, count(*) AS n FROM snippets GROUP BY run_id),
                        scored AS (SELECT run_id, count(*) AS n FROM scores GROUP BY run_id)
                   SELECT r.run_id, r.kind, r.status, r.message, r.model, r.method, r.backend, r.created_at,
                          r.updated_at, coalesce(p.n, 0) AS n_snippets, coalesce(s.n, 0) AS n_scored,
                          r.heartbeat, r.pid, r.host
                   FROM runs r LEFT JOIN planned p USING (run_id) LEFT JOIN scored s USING (run_id)
                   {} ORDER BY r.created_at DESC"""
        with self._connect() as con:
            if kind:
                df = con.execute(query.format("WHERE r.kind = ?"), [kind]).df()
            else:
                df = con.execute(query.format("")).df()
        return live_messages(shown_status(df))

    def set_status(self, run_id: str, status: str, message: str = "", *, backend: str | None = None,
                   owner: bool = False) -> None:
        """Record the run's state (created, running, scored, interrupted, failed, done) with a message and backend.

        owner : this process is now scoring the run: record its pid and host, the session's start (`run_progress`)
            and start the heartbeat.
        """
        with self._connect() as con, transaction(con):
            con.execute("UPDATE runs SET status = ?, message = ?, updated_at = ? WHERE run_id = ?",
                        [status, message, now(), run_id])
            if backend is not None:
                con.execute("UPDATE runs SET backend = ? WHERE run_id = ?", [backend, run_id])
            if owner:
                stamp = now()
                con.execute("UPDATE runs SET pid = ?, host = ?, heartbeat = ?, started_at = ? WHERE run_id = ?",
                            [os.getpid(), HOST, stamp, stamp, run_id])

    # snippets and problems ----------------------------------------------------------------------
    def problems(self, run_id: str) -> pd.DataFrame:
        with self._connect() as con:
            return con.execute("SELECT book, role, message FROM problems WHERE run_id = ?", [run_id]).df()

    def pending(self, run_id: str) -> pd.DataFrame:
        """Planned snippets without a stored score, with their texts, in plan order (role, book, position)."""
        with self._connect() as con:
            return con.execute("""SELECT s.* EXCLUDE (run_id) FROM snippets s WHERE s.run_id = ? AND NOT EXISTS
                                  (SELECT 1 FROM scores c WHERE c.run_id = s.run_id AND c.snippet_id = s.snippet_id)
                                  ORDER BY s.role, s.book, s.position""", [run_id]).df()

    def pending_ids(self, run_id: str) -> pd.DataFrame:
        """Ids (column snippet_id) of planned snippets without a stored score, in plan order; no texts."""
        with self._connect() as con:
            return con.execute("""SELECT s.snippet_id FROM snippets s WHERE s.run_id = ? AND NOT EXISTS
                                  (SELECT 1 FROM scores c WHERE c.run_id = s.run_id AND c.snippet_id = s.snippet_id)
                                  ORDER BY s.role, s.book, s.position""", [run_id]).df()

    def claim_pending(self, run_id: str, session: str, limit: int | None) -> list[str]:
        """Claim up to `limit` (None: all) pending snippets no live process has claimed, for `session` (`claims`)."""
        return self.claim_snippets(run_id, session, self.pending_ids(run_id)["snippet_id"].tolist(), limit)

    def claim_snippets(self, run_id: str, session: str, ids: Sequence[str], limit: int | None = None) -> list[str]:
        """Claim those of `ids` (at most `limit`) that have no score and no live claim, for `session` (`claims`)."""
        with self._connect() as con, transaction(con):
            return claims.claim(con, run_id, session, ids, limit)

    def release_claims(self, run_id: str, session: str) -> None:
        """Drop `session`'s claims on the run (what it did not score is pending for others again)."""
        with self._connect() as con:
            claims.release(con, run_id, session)

    def snippet_texts(self, run_id: str, ids: Sequence[str]) -> pd.Series:
        """The texts of these snippets (a Series indexed by snippet id, in the order asked); KeyError for unknown ids."""
        wanted = pd.DataFrame({"snippet_id": pd.Series(list(ids), dtype=object), "n": range(len(ids))})
        with self._connect() as con:
            if len(wanted) <= POINT_LOOKUPS:  # the few snippets shown: no scan of every text
                rows = [(i, r[0]) for i in wanted["snippet_id"] for r in con.execute(
                    "SELECT text FROM snippets WHERE run_id = ? AND snippet_id = ?", [run_id, i]).fetchall()]
                found = pd.DataFrame(rows, columns=["snippet_id", "text"])
            else:
                con.register("wanted", wanted)
                found = con.execute("""SELECT w.snippet_id, s.text FROM wanted w JOIN snippets s
                                       ON s.run_id = ? AND s.snippet_id = w.snippet_id ORDER BY w.n""", [run_id]).df()
        if len(found) != len(wanted):
            missing = sorted(set(wanted["snippet_id"]) - set(found["snippet_id"]))
            raise KeyError(f"run {run_id} has no snippet {', '.join(missing[:5])}")
        return pd.Series(found["text"].to_numpy(), index=pd.Index(found["snippet_id"], name="snippet_id"), name="text")

    # scores -------------------------------------------------------------------------------------
    def write_scores(self, run_id: str, scores: pd.DataFrame, *, fingerprint: str, method: str, params: dict,
                     code_version: str, session: str) -> None:
        """Commit finished scores (columns `SCORE_COLUMNS`) and the run's heartbeat, and release `session`'s claims on
        those snippets (`claims`), in one transaction; a stored score is never overwritten."""
        frame = scores[SCORE_COLUMNS].copy()
        frame.insert(0, "run_id", run_id)
        stamp = now()
        for name, value in (("fingerprint", fingerprint), ("method", method), ("params", to_json(params)),
                            ("code_version", code_version), ("session", session), ("computed_at", stamp)):
            frame[name] = value
        with self._connect() as con, transaction(con):
            _insert_missing(con, "scores", frame)
            con.execute("UPDATE runs SET heartbeat = ? WHERE run_id = ?", [stamp, run_id])
            claims.release(con, run_id, session, frame["snippet_id"])

    def results(self, run_id: str, *, with_texts: bool = False) -> pd.DataFrame:
        """Every planned snippet's keys and score (NaN if not scored yet) and who scored it when, without its text.

        Texts are fetched with `snippet_texts` for the few snippets shown; `with_texts` adds column
        text, for work that needs every text (gigabytes for a catalogue: 10^6 snippets of 512 words).
        """
        with self._connect() as con:
            con.execute(f"SET memory_limit = '{READ_MEMORY_LIMIT}'")
            return fetch_frame(con.execute(f"""SELECT s.snippet_id, s.book, s.role, s.label, s.position, s.n_words,
                                                      c.score, c.n_tokens, c.truncated, c.session, c.computed_at
                                                      {", s.text" if with_texts else ""}
                                               FROM snippets s LEFT JOIN scores c USING (run_id, snippet_id)
                                               WHERE s.run_id = ? ORDER BY s.role, s.book, s.position""", [run_id]))

    def progress(self, run_id: str) -> tuple[int, int]:
        """(scored, planned) snippet counts of a run."""
        with self._connect() as con:
            planned = con.execute("SELECT count(*) FROM snippets WHERE run_id = ?", [run_id]).fetchone()[0]
            scored = con.execute("SELECT count(*) FROM scores WHERE run_id = ?", [run_id]).fetchone()[0]
        return int(scored), int(planned)

    def run_progress(self, run_id: str) -> RunProgress:
        """The run's status (as shown, see `runs`), counts and batch timestamps, in one read; KeyError if no such run."""
        with self._connect() as con:
            df = con.execute("""SELECT r.status, r.message, r.heartbeat, r.pid, r.host, r.run_id, r.started_at,
                                       (SELECT count(*) FROM snippets s WHERE s.run_id = r.run_id) AS planned,
                                       count(c.snippet_id) AS scored,
                                       count(c.snippet_id) FILTER (WHERE c.computed_at < r.started_at) AS scored_before,
                                       max(c.computed_at) AS last_batch_at
                                FROM runs r LEFT JOIN scores c USING (run_id) WHERE r.run_id = ?
                                GROUP BY ALL""", [run_id]).df()
        if df.empty:
            raise KeyError(f"no run {run_id!r} in {self.path}")
        row = shown_status(df).iloc[0]
        started = None if pd.isna(row["started_at"]) else row["started_at"].to_pydatetime()
        last = None if pd.isna(row["last_batch_at"]) else row["last_batch_at"].to_pydatetime()
        return RunProgress(str(row["status"]), int(row["scored"]), int(row["planned"]), int(row["scored_before"]),
                           started, last)

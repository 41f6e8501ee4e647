"""The results store's DuckDB file: schema, connections (locked, memory-capped), transactions and chunked reads.

Connections are opened per operation, so a dashboard can read a store while a CLI job (another
process) writes to it; a locked file is retried briefly, and a file that is not a DuckDB database
(or a damaged one) is a `StoreUnreadable` (a ValueError) naming it. `runs.store.ResultsStore` is built on these.
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, kind VARCHAR, created_at TIMESTAMP, updated_at TIMESTAMP, status VARCHAR,
    message VARCHAR, model VARCHAR, fingerprint VARCHAR, method VARCHAR, params VARCHAR, seed INTEGER,
    code_version VARCHAR, backend VARCHAR, config VARCHAR, plan VARCHAR, heartbeat TIMESTAMP, pid INTEGER,
    host VARCHAR);
CREATE TABLE IF NOT EXISTS snippets (
    run_id VARCHAR, snippet_id VARCHAR, book VARCHAR, role VARCHAR, label INTEGER, position INTEGER,
    n_words INTEGER, text VARCHAR, PRIMARY KEY (run_id, snippet_id));
CREATE TABLE IF NOT EXISTS scores (
    run_id VARCHAR, snippet_id VARCHAR, score DOUBLE, n_tokens INTEGER, truncated BOOLEAN,
    fingerprint VARCHAR, method VARCHAR, params VARCHAR, code_version VARCHAR, session VARCHAR,
    computed_at TIMESTAMP, PRIMARY KEY (run_id, snippet_id));
CREATE TABLE IF NOT EXISTS problems (run_id VARCHAR, book VARCHAR, role VARCHAR, message VARCHAR);
CREATE TABLE IF NOT EXISTS extraction_books (
    run_id VARCHAR, book VARCHAR, role VARCHAR, label INTEGER, position INTEGER, n_text_tokens INTEGER, text VARCHAR,
    PRIMARY KEY (run_id, book));
CREATE TABLE IF NOT EXISTS extraction_units (
    run_id VARCHAR, unit_id VARCHAR, book VARCHAR, position INTEGER, first_window INTEGER, n_windows INTEGER,
    work BLOB, spans BLOB, PRIMARY KEY (run_id, unit_id));
CREATE TABLE IF NOT EXISTS extraction_results (
    run_id VARCHAR, unit_id VARCHAR, result BLOB, session VARCHAR, computed_at TIMESTAMP,
    PRIMARY KEY (run_id, unit_id));
CREATE TABLE IF NOT EXISTS api_calls (
    run_id VARCHAR, seq BIGINT, unit VARCHAR, step INTEGER, attempt INTEGER, call_id VARCHAR, parent_call_id VARCHAR,
    sent_at VARCHAR, received_at VARCHAR, url VARCHAR, request BLOB, request_sha256 VARCHAR, status INTEGER,
    response BLOB, response_sha256 VARCHAR, failure VARCHAR, summary VARCHAR, prev_hash VARCHAR, hash VARCHAR,
    PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS api_results (run_id VARCHAR, unit VARCHAR, result VARCHAR, PRIMARY KEY (run_id, unit));
ALTER TABLE runs ADD COLUMN IF NOT EXISTS plan VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS head_hash VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS heartbeat TIMESTAMP;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS pid INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS started_at TIMESTAMP;
"""
#: The columns each table has had since stores were first written (SCHEMA's ALTERs add the later ones). A file
#: whose tables are not these is another program's database: refused, never altered.
BASE_COLUMNS = {
    "runs": {"run_id", "kind", "created_at", "updated_at", "status", "message", "model", "fingerprint", "method",
             "params", "seed", "code_version", "backend", "config"},
    "snippets": {"run_id", "snippet_id", "book", "role", "label", "position", "n_words", "text"},
    "scores": {"run_id", "snippet_id", "score", "n_tokens", "truncated", "fingerprint", "method", "params",
               "code_version", "session", "computed_at"},
    "problems": {"run_id", "book", "role", "message"},
    "claims": {"run_id", "snippet_id", "session", "pid", "host", "claimed_at"},
    # a book audit's extraction windows as units of work (`runs.extraction_units`)
    "extraction_books": {"run_id", "book", "role", "label", "position", "n_text_tokens", "text"},
    "extraction_units": {"run_id", "unit_id", "book", "position", "first_window", "n_windows", "work", "spans"},
    "extraction_results": {"run_id", "unit_id", "result", "session", "computed_at"},
    # a chat API run's evidence record and derived results (`runs.evidence`)
    "api_calls": {"run_id", "seq", "unit", "step", "attempt", "call_id", "parent_call_id", "sent_at", "received_at",
                  "url", "request", "request_sha256", "status", "response", "response_sha256", "failure", "summary",
                  "prev_hash", "hash"},
    "api_results": {"run_id", "unit", "result"},
}
#: How long to keep retrying when another process holds the file.
LOCK_WAIT_S = 30.0
#: DuckDB's memory per connection (buffer pool, sorts, joins; beyond it, it spills to disk). Without it, reading a
#: 10^6-snippet store cached ~2 GB of text pages and reached 8.4 GB RSS; 512 MB keeps the analysis under 1 GB.
MEMORY_LIMIT = "512MB"
#: DuckDB's memory while reading every snippet's keys and scores (`ResultsStore.results`): the join and sort of 10^6
#: rows then peaked 0.45 GB at MEMORY_LIMIT, 0.36 GB at this (spilling the rest; +0.3 s), the analysis stays < 1 GB.
READ_MEMORY_LIMIT = "256MB"
#: Large results are fetched in chunks of this many DuckDB vectors (2,048 rows each: ~100k rows). Fetching 10^6
#: keys and scores at once peaked 0.3 GB above the frame it returned (DuckDB's result and pandas' copy together).
READ_CHUNK_VECTORS = 50


@contextlib.contextmanager
def connect(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the store at `path`, retried while another process holds the file's lock.

    Within a process, operations on one file are serialised (DuckDB refuses two threads attaching
    the same file at once, e.g. a background job writing while a page reads); always read-write,
    since DuckDB also refuses mixed read-only/read-write connections to one file in a process.
    A file that is not a DuckDB database, or a damaged one, is a ValueError naming the file.
    """
    with _process_lock(path):
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                con = duckdb.connect(str(path))
                break
            except duckdb.IOException as err:
                if "lock" not in str(err).lower() or time.monotonic() > deadline:
                    raise unreadable(path, err) from err
                time.sleep(0.05)
            except duckdb.Error as err:
                raise unreadable(path, err) from err
        try:
            con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
            yield con
        except duckdb.Error as err:  # damage found only when a page is read; not, e.g., a full disk
            damaged = isinstance(err, duckdb.SerializationException) or any(
                sign in str(err).lower() for sign in ("corrupt", "could not read enough bytes", "not a valid duckdb"))
            if damaged:
                raise unreadable(path, err) from err
            raise
        finally:
            con.close()


def check_schema(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a DuckDB file that holds other tables than a store's, or a store's tables without their columns (a
    foreign `runs` table failed later, on a page, as a binder error)."""
    tables = dict(con.execute("SELECT table_name, list(column_name) FROM information_schema.columns "
                              "WHERE table_schema = 'main' GROUP BY table_name").fetchall())
    foreign = sorted(set(tables) - set(BASE_COLUMNS))
    lacking = [f"{name} lacks {', '.join(sorted(BASE_COLUMNS[name] - set(columns)))}"
               for name, columns in sorted(tables.items()) if name in BASE_COLUMNS and BASE_COLUMNS[name] - set(columns)]
    if foreign or lacking:
        found = ([f"other tables ({', '.join(foreign[:5])})"] if foreign else []) + lacking
        raise unreadable(path, ValueError(f"its tables are not a store's: {'; '.join(found)}"))


def check_blocks(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Read every stored value of every table once, so a damaged block is found when the store is opened, before
    anything is written to it, not later on some page: DuckDB checks a block's checksum only when it reads it.
    About 1 s per 0.4 GB of store file (a 2-core machine); run after `check_schema` (the tables are a store's)."""
    tables = [row[0] for row in con.execute("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_schema = 'main' AND table_type = 'BASE TABLE'").fetchall()]
    try:
        for table in tables:
            con.execute(f'SELECT count(*), sum(hash(COLUMNS(*))) FROM "{table}"').fetchall()
    except duckdb.Error as err:
        raise unreadable(path, err) from err


class StoreUnreadable(ValueError):
    """A store file that cannot be used: not a DuckDB file, another program's database, or a damaged one."""


def unreadable(path: Path, err: Exception) -> StoreUnreadable:
    """The error of a store file DuckDB cannot open or read."""
    return StoreUnreadable(f"{path} is not a readable MIA Lens results store (a DuckDB file): {err}. Point --store (or "
                      "$MIA_LENS_STORE) at another file, or move this one away")


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """All statements in the block commit together, or none (rolled back on any error; lost if the process dies)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def insert_missing(con: duckdb.DuckDBPyConnection, table: str, frame: pd.DataFrame) -> None:
    """Insert `frame`'s rows whose (run_id, snippet_id) is not in `table` yet (planned snippets, scores)."""
    con.register("incoming", frame)
    con.execute(f"INSERT INTO {table} SELECT * FROM incoming i WHERE NOT EXISTS "
                f"(SELECT 1 FROM {table} t WHERE t.run_id = i.run_id AND t.snippet_id = i.snippet_id)")


def fetch_frame(result: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """An executed query's rows as one DataFrame, fetched `READ_CHUNK_VECTORS` at a time (no full-size spike)."""
    parts = [result.fetch_df_chunk(READ_CHUNK_VECTORS)]
    while len(parts[-1]):
        parts.append(result.fetch_df_chunk(READ_CHUNK_VECTORS))
    return parts[0] if len(parts) <= 2 else pd.concat(parts[:-1], ignore_index=True)


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _process_lock(path: Path) -> threading.RLock:
    """One lock per store file in this process."""
    key = str(path.resolve())
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.RLock())


def now() -> datetime:
    """UTC now without a time zone (what the TIMESTAMP columns hold)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def to_json(value) -> str:
    """Canonical JSON of parameters, configs and plans (sorted keys), as stored and compared."""
    return json.dumps(value, sort_keys=True, default=str)

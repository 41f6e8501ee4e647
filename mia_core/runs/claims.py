"""Claims on a run's snippets, so two processes scoring one run split it instead of both scoring all of it.

A scoring process reads the run's pending snippets once, then claims them a batch at a time (those with no score
and no live claim) in one transaction before it scores them, scores only what it claimed, and releases the claims
once the scores are stored; DuckDB's file lock puts the claims of different processes one after the other. A claim dies with its process: one whose pid is gone on this host is taken over at once (a `kill -9` resumes
at once), one from another host after `STALE_HEARTBEAT_S` (the rule that shows a silent run as interrupted).
A book audit's extraction units (`runs.extraction_units`) are claimed the same way, their results in another table.
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Sequence

import duckdb
import pandas as pd

from .run_status import HOST, STALE_HEARTBEAT_S, pid_alive
from .store_db import now

SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    run_id VARCHAR, snippet_id VARCHAR, session VARCHAR, pid INTEGER, host VARCHAR, claimed_at TIMESTAMP,
    PRIMARY KEY (run_id, snippet_id));
"""
#: Where a claimed unit's finished result is stored: (table, its id column). A claim's snippet_id is that unit's id.
SNIPPETS_DONE = ("scores", "snippet_id")
EXTRACTION_DONE = ("extraction_results", "unit_id")
API_DONE = ("api_results", "unit")


def claim(con: duckdb.DuckDBPyConnection, run_id: str, session: str, ids: Sequence[str],
          limit: int | None = None, *, done: tuple[str, str] = SNIPPETS_DONE) -> list[str]:
    """Claim for `session` those of `ids` (in their order, at most `limit`) that have no result in `done` (scores, or
    extraction results) and no live claim; their ids. Call inside a transaction. The lookups join the given ids only: a batch's claim costs the same in a
    run of 10^6 snippets as in one of 10^3 (a scan of the run per batch cost 88 ms there)."""
    _clear_dead(con, run_id, session)
    wanted = pd.DataFrame({"snippet_id": pd.Series(list(ids), dtype=object), "n": range(len(ids))})
    con.register("wanted_claims", wanted)
    table, key = {SNIPPETS_DONE: SNIPPETS_DONE, EXTRACTION_DONE: EXTRACTION_DONE, API_DONE: API_DONE}[tuple(done)]  # never free SQL
    try:
        rows = con.execute(f"""SELECT w.snippet_id FROM wanted_claims w
                               WHERE NOT EXISTS (SELECT 1 FROM {table} c WHERE c.run_id = ? AND c.{key} = w.snippet_id)
                               AND NOT EXISTS (SELECT 1 FROM claims k WHERE k.run_id = ? AND k.snippet_id = w.snippet_id)
                               ORDER BY w.n {'' if limit is None else 'LIMIT ?'}""",
                           [run_id, run_id] + ([] if limit is None else [int(limit)])).fetchall()
    finally:
        con.unregister("wanted_claims")
    claimed = [r[0] for r in rows]
    if claimed:
        stamp = now()
        con.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                        [[run_id, i, session, os.getpid(), HOST, stamp] for i in claimed])
    return claimed


def _clear_dead(con: duckdb.DuckDBPyConnection, run_id: str, session: str) -> None:
    """Drop other sessions' claims that died: at once for a gone pid on this host, after `STALE_HEARTBEAT_S` else.
    Claims held are a run's batches in flight (each is released once scored), so this reads few rows."""
    holders = con.execute("SELECT DISTINCT pid, host FROM claims WHERE run_id = ? AND session <> ?",
                          [run_id, session]).fetchall()
    for pid, host in holders:
        if host == HOST and not pid_alive(int(pid)):
            con.execute("DELETE FROM claims WHERE run_id = ? AND pid = ? AND host = ?", [run_id, pid, host])
    con.execute("DELETE FROM claims WHERE run_id = ? AND claimed_at < ?",
                [run_id, now() - timedelta(seconds=STALE_HEARTBEAT_S)])


def release(con: duckdb.DuckDBPyConnection, run_id: str, session: str, ids: Sequence[str] | None = None) -> None:
    """Drop the session's claims on the run (only those of `ids` when given): once scored, or what it did not score,
    which is pending for others again."""
    if ids is None:
        con.execute("DELETE FROM claims WHERE run_id = ? AND session = ?", [run_id, session])
        return
    con.register("released_claims", pd.DataFrame({"snippet_id": pd.Series(list(ids), dtype=object)}))
    try:
        con.execute("DELETE FROM claims WHERE run_id = ? AND session = ? AND snippet_id IN "
                    "(SELECT snippet_id FROM released_claims)", [run_id, session])
    finally:
        con.unregister("released_claims")

"""Claims on a run's snippets, so two processes scoring one run split it instead of both scoring all of it.

A scoring process claims a batch of pending snippets (no score, no live claim) in one transaction before it scores
them, and scores only what it claimed; DuckDB's file lock puts the claims of different processes one after the
other. A claim dies with its process: one whose pid is gone on this host is taken over at once (a `kill -9` resumes
at once), one from another host after `STALE_HEARTBEAT_S` (the rule that shows a silent run as interrupted).
"""
from __future__ import annotations

import os
from datetime import timedelta

import duckdb

from .run_status import HOST, STALE_HEARTBEAT_S, pid_alive
from .store_db import now

SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    run_id VARCHAR, snippet_id VARCHAR, session VARCHAR, pid INTEGER, host VARCHAR, claimed_at TIMESTAMP,
    PRIMARY KEY (run_id, snippet_id));
"""


def claim(con: duckdb.DuckDBPyConnection, run_id: str, session: str, limit: int | None) -> list[str]:
    """Claim up to `limit` (None: every) pending snippets of the run for `session`, in plan order; their ids.

    Call inside a transaction. Claims on scored snippets and dead claims are cleared first.
    """
    con.execute("""DELETE FROM claims c WHERE c.run_id = ? AND EXISTS
                   (SELECT 1 FROM scores s WHERE s.run_id = c.run_id AND s.snippet_id = c.snippet_id)""", [run_id])
    holders = con.execute("SELECT DISTINCT pid, host FROM claims WHERE run_id = ? AND session <> ?",
                          [run_id, session]).fetchall()
    for pid, host in holders:
        if host == HOST and not pid_alive(int(pid)):
            con.execute("DELETE FROM claims WHERE run_id = ? AND pid = ? AND host = ?", [run_id, pid, host])
    con.execute("DELETE FROM claims WHERE run_id = ? AND claimed_at < ?",
                [run_id, now() - timedelta(seconds=STALE_HEARTBEAT_S)])
    rows = con.execute(f"""SELECT s.snippet_id FROM snippets s WHERE s.run_id = ?
                           AND NOT EXISTS (SELECT 1 FROM scores c WHERE c.run_id = s.run_id AND c.snippet_id = s.snippet_id)
                           AND NOT EXISTS (SELECT 1 FROM claims k WHERE k.run_id = s.run_id AND k.snippet_id = s.snippet_id)
                           ORDER BY s.role, s.book, s.position {'' if limit is None else 'LIMIT ?'}""",
                       [run_id] + ([] if limit is None else [int(limit)])).fetchall()
    ids = [r[0] for r in rows]
    if ids:
        stamp = now()
        con.executemany("INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?)",
                        [[run_id, i, session, os.getpid(), HOST, stamp] for i in ids])
    return ids


def release(con: duckdb.DuckDBPyConnection, run_id: str, session: str) -> None:
    """Drop the session's claims on the run (scored or not: what it did not score is pending for others)."""
    con.execute("DELETE FROM claims WHERE run_id = ? AND session = ?", [run_id, session])

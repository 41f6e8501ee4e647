"""A chat API run's results in the results store: one JSON result per text (unit), the run's texts as its snippets,
and claims on texts so that two processes on one run split them (`runs.claims`, with `API_DONE`)."""
from __future__ import annotations

import json

import pandas as pd

from . import claims
from .store import ResultsStore
from .store_db import transaction


def store_result(store: ResultsStore, run_id: str, unit: str, result: dict) -> None:
    with store._connect() as con:
        with transaction(con):
            con.execute("DELETE FROM api_results WHERE run_id = ? AND unit = ?", [run_id, unit])
            con.execute("INSERT INTO api_results VALUES (?, ?, ?)", [run_id, unit, json.dumps(result, sort_keys=True)])


def stored_results(store: ResultsStore, run_id: str) -> dict[str, dict]:
    with store._connect() as con:
        rows = con.execute("SELECT unit, result FROM api_results WHERE run_id = ?", [run_id]).fetchall()
    return {unit: json.loads(result) for unit, result in rows}


def run_texts(store: ResultsStore, run_id: str) -> pd.DataFrame:
    """The run's texts (unit, name, role, text) in order, as stored with it."""
    with store._connect() as con:
        return con.execute("SELECT snippet_id AS unit, book AS name, role, text FROM snippets WHERE run_id = ? "
                           "ORDER BY position", [run_id]).df()


def results_table(store: ResultsStore, run_id: str) -> pd.DataFrame:
    """One row per text: its name and role with its stored result's numbers (texts not yet done have none)."""
    texts = run_texts(store, run_id).drop(columns="text")
    results = stored_results(store, run_id)
    rows = [{**row, **{k: v for k, v in results.get(row["unit"], {}).items() if k != "blocks"}}
            for row in texts.to_dict("records")]
    return pd.DataFrame(rows)


def claim_unit(store: ResultsStore, run_id: str, session: str, unit: str) -> bool:
    """Claim one text for `session` (False: it has a result, or a live process holds it)."""
    with store._connect() as con:
        with transaction(con):
            return bool(claims.claim(con, run_id, session, [unit], 1, done=claims.API_DONE))


def keep_claim(store: ResultsStore, run_id: str, session: str) -> None:
    """Renew the session's claims (a conversation lasts longer than a claim's stale age)."""
    with store._connect() as con:
        con.execute("UPDATE claims SET claimed_at = ? WHERE run_id = ? AND session = ?", [claims.now(), run_id, session])


def release_unit(store: ResultsStore, run_id: str, session: str, unit: str) -> None:
    with store._connect() as con:
        claims.release(con, run_id, session, [unit])

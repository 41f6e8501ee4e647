"""Two processes on one run split it: each snippet is scored once, and a dead process's claims are taken over."""
from __future__ import annotations

import subprocess
import sys
import threading
from datetime import timedelta
from types import SimpleNamespace

import duckdb
import pytest

from mia_core import load_model
from mia_core.audit import batches
from mia_core.audit.jobs import plan_audit, run_scoring
from mia_core.model.options import ModelRef
from mia_core.runs.run_status import HOST, STALE_HEARTBEAT_S
from mia_core.runs.store import ResultsStore
from mia_core.runs.store_db import now

from tests.runs.test_store_hardening import SETTINGS, library
from tests.support.tiny import save_tiny_model


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("tiny-model"))))


def planned(tmp_path, lm) -> tuple[ResultsStore, str]:
    store = ResultsStore(tmp_path / "r.duckdb")
    books, calibration = library()
    return store, plan_audit(store, ModelRef(lm.spec), books, calibration, SETTINGS, lm=lm)


def claims_of(store: ResultsStore, run_id: str) -> list[tuple]:
    con = duckdb.connect(str(store.path))
    try:
        return con.execute("SELECT session, pid, host FROM claims WHERE run_id = ? ORDER BY snippet_id",
                           [run_id]).fetchall()
    finally:
        con.close()


def test_two_scorers_on_one_run_score_each_snippet_once(tmp_path, lm, monkeypatch):
    """Before: each scored every pending snippet (the store kept the first score; the work was done twice)."""
    monkeypatch.setattr(batches, "CLAIM_POLL_S", 0.05)
    store, run_id = planned(tmp_path, lm)
    total = store.progress(run_id)[1]
    computed = []
    started = threading.Barrier(2)

    def scorer() -> None:
        started.wait()
        computed.append(run_scoring(ResultsStore(store.path), run_id, ModelRef.of(lm), lm=lm))

    threads = [threading.Thread(target=scorer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(computed) == 2 and sum(computed) == total
    results = store.results(run_id)
    assert results["score"].notna().all() and len(results) == total
    assert claims_of(store, run_id) == []  # released at the end
    assert store.run(run_id)["status"] == "scored"


def test_a_dead_process_claims_are_taken_over_and_a_live_remote_one_waits_for_its_time(tmp_path, lm):
    store, run_id = planned(tmp_path, lm)
    total = store.progress(run_id)[1]
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a pid that is gone
    assert len(store.claim_pending(run_id, "dead", 3)) == 3
    con = duckdb.connect(str(store.path))
    con.execute("UPDATE claims SET pid = ? WHERE session = 'dead'", [proc.pid])
    con.close()
    assert len(store.claim_pending(run_id, "remote", 2)) == 2
    con = duckdb.connect(str(store.path))
    con.execute("UPDATE claims SET host = 'elsewhere', pid = 1 WHERE session = 'remote'")
    con.close()
    mine = store.claim_pending(run_id, "me", None)
    assert len(mine) == total - 2  # the dead process's 3 taken over; the other host's 2 still held
    assert {c[0] for c in claims_of(store, run_id)} == {"me", "remote"}
    con = duckdb.connect(str(store.path))
    con.execute("UPDATE claims SET claimed_at = ? WHERE session = 'remote'",
                [now() - timedelta(seconds=STALE_HEARTBEAT_S + 60)])
    con.close()
    assert len(store.claim_pending(run_id, "later", None)) == 2  # silent for longer than a heartbeat may be
    store.release_claims(run_id, "me")
    assert {c[0] for c in claims_of(store, run_id)} == {"later"} and HOST != "elsewhere"

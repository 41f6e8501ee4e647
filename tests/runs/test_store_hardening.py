"""The results store under faults: corrupt files, runs left "running" by a dead process, texts read only when shown."""
from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest

from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore, StoreUnreadable

from tests.support.books import words
from tests.support.cli_runner import run_cli

W = 8  # words per snippet
SETTINGS = AuditSettings(snippet_words=W, n_boot=50, batch_snippets=4)


def library() -> tuple[list[Book], list[Book]]:
    """Books of numbered words (tag per book), so every snippet's text can be written down independently."""
    calibration = [Book(f"cal-{tag}", words(4 * W, tag), "test", label)
                   for tag, label in (("m", 1), ("n", 0), ("k", 1), ("j", 0))]
    return [Book("audit-a", words(3 * W, "a"), "test"), Book("audit-b", words(2 * W, "b"), "test")], calibration


def planned_store(tmp_path: Path) -> tuple[ResultsStore, str]:
    store = ResultsStore(tmp_path / "r.duckdb")
    books, calibration = library()
    return store, plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, lm=SimpleNamespace(fingerprint="fp"))


def expected_text(tag: str, position: int) -> str:
    """Snippet `position` of a book `words(n, tag)`: words position*W … position*W + W − 1."""
    return " ".join(f"{tag}{i}" for i in range(position * W, (position + 1) * W))


# corrupt or foreign store files -----------------------------------------------------------------
@pytest.fixture
def bad_stores(tmp_path) -> dict[str, Path]:
    """A text file, a truncated DuckDB file, a DuckDB file with flipped bytes, one with a `runs` table of other
    columns and another program's database."""
    good = tmp_path / "good.duckdb"
    con = duckdb.connect(str(good))
    con.execute("CREATE TABLE t AS SELECT i, 'x' || i AS s FROM range(100000) r(i)")
    con.close()
    data = bytearray(good.read_bytes())
    paths = {"text": tmp_path / "notes.duckdb", "truncated": tmp_path / "truncated.duckdb",
             "flipped": tmp_path / "flipped.duckdb"}
    paths["text"].write_text("these are my notes, not a database\n" * 50)
    paths["truncated"].write_bytes(bytes(data[:5000]))
    for offset in range(5000, len(data), 7919):
        data[offset] ^= 0xFF
    paths["flipped"].write_bytes(bytes(data))
    paths["foreign runs table"] = tmp_path / "foreign.duckdb"  # another program's `runs`: was altered, then failed
    con = duckdb.connect(str(paths["foreign runs table"]))     # on a page with a binder error
    con.execute("CREATE TABLE runs (x INTEGER)")
    con.close()
    paths["another program's database"] = good
    return paths


def test_a_corrupt_or_foreign_store_file_is_a_clear_value_error(bad_stores):
    for kind, path in bad_stores.items():
        before = path.read_bytes()
        with pytest.raises(ValueError, match="not a readable MIA Lens results store") as err:
            ResultsStore(path)
        assert str(path) in str(err.value), kind
        assert path.read_bytes() == before, kind  # the file is left as it was


def test_a_corrupt_store_through_the_cli_is_one_error_line_and_exit_2(bad_stores, tmp_path):
    books, calibration = library()
    pd.DataFrame({"book": [b.name for b in calibration], "text": [b.text for b in calibration],
                  "label": [b.label for b in calibration]}).to_csv(tmp_path / "cal.csv", index=False)
    pd.DataFrame({"book": [b.name for b in books], "text": [b.text for b in books]}).to_csv(tmp_path / "books.csv",
                                                                                          index=False)
    code, _, err = run_cli("audit-books", "--model", tmp_path / "no-model-needed", "--calibration", tmp_path / "cal.csv",
                           "--books", tmp_path / "books.csv", "--snippet-words", W, "--output-dir", tmp_path / "out",
                           "--store", bad_stores["text"])
    assert code == 2, err
    assert err.strip().splitlines()[-1].startswith("error: ") and "not a readable MIA Lens results store" in err
    assert "Traceback" not in err


def damaged_copies(folder: Path) -> dict[str, Path]:
    """Copies of a real store with three planned runs: cut in half, and with a block of snippet texts in the middle
    overwritten by random bytes (DuckDB found either only when a page read the runs: after opening, a traceback).
    A damaged block of an index is still found only when the index is first read (the page says so then too)."""
    store = ResultsStore(folder / "good.duckdb")
    books, calibration = library()
    for seed in range(3):
        plan_audit(store, ModelRef("tiny"), books, calibration, AuditSettings(snippet_words=W, seed=seed),
                   lm=SimpleNamespace(fingerprint=f"fp{seed}"))
    con = duckdb.connect(str(store.path), read_only=True)
    blocks = sorted({b for (b,) in con.execute("SELECT block_id FROM pragma_storage_info('snippets') "
                                               "WHERE column_name = 'text' AND block_id >= 0").fetchall()})
    size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
    con.close()
    data, start = store.path.read_bytes(), 3 * 4096 + blocks[len(blocks) // 2] * size  # a 12 KB header, then blocks
    paths = {"truncated": folder / "truncated.duckdb", "overwritten": folder / "overwritten.duckdb"}
    paths["truncated"].write_bytes(data[:len(data) // 2])
    paths["overwritten"].write_bytes(data[:start] + random.Random(0).randbytes(size) + data[start + size:])
    return paths


def test_a_damaged_store_with_runs_is_refused_when_opened_and_left_as_it_was(tmp_path):
    """A truncated store, or one with a block overwritten, used to open and fail later on the page (a traceback)."""
    for kind, path in damaged_copies(tmp_path).items():
        before = path.read_bytes()
        with pytest.raises(StoreUnreadable, match="not a readable MIA Lens results store"):
            ResultsStore(path)
        assert path.read_bytes() == before, kind


def test_a_damaged_store_with_runs_through_the_cli_is_one_error_line_and_exit_2(tmp_path):
    books, calibration = library()
    pd.DataFrame({"book": [b.name for b in calibration], "text": [b.text for b in calibration],
                  "label": [b.label for b in calibration]}).to_csv(tmp_path / "cal.csv", index=False)
    pd.DataFrame({"book": [b.name for b in books], "text": [b.text for b in books]}).to_csv(tmp_path / "books.csv",
                                                                                          index=False)
    for kind, path in damaged_copies(tmp_path).items():
        before = path.read_bytes()
        code, _, err = run_cli("audit-books", "--model", tmp_path / "no-model-needed", "--calibration",
                               tmp_path / "cal.csv", "--books", tmp_path / "books.csv", "--snippet-words", W,
                               "--output-dir", tmp_path / "out", "--store", path)
        assert code == 2, (kind, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and "not a readable MIA Lens results store" in err
        assert path.read_bytes() == before, kind


# runs left "running" by a process that is gone ---------------------------------------------------
def dead_pid() -> int:
    """The id of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def mark_running(store: ResultsStore, run_id: str, *, pid: int, host: str, age_s: float) -> None:
    """What a scoring process records: status running, its pid and host, a heartbeat `age_s` seconds old."""
    beat = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(seconds=age_s)
    con = duckdb.connect(str(store.path))
    con.execute("UPDATE runs SET status = 'running', message = 'scoring', pid = ?, host = ?, heartbeat = ? "
                "WHERE run_id = ?", [pid, host, beat, run_id])
    con.close()


def shown_status(store: ResultsStore, run_id: str) -> tuple[str, str]:
    runs = store.runs().set_index("run_id")
    assert store.run(run_id)["status"] == runs.at[run_id, "status"]  # the run's page and the runs table agree
    return runs.at[run_id, "status"], runs.at[run_id, "message"]


def stored_status(store: ResultsStore, run_id: str) -> str:
    con = duckdb.connect(str(store.path))
    try:
        return con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
    finally:
        con.close()


def test_a_run_whose_process_is_gone_shows_as_interrupted_with_how_to_resume(tmp_path):
    store, run_id = planned_store(tmp_path)
    here = socket.gethostname()
    mark_running(store, run_id, pid=dead_pid(), host=here, age_s=5)
    status, message = shown_status(store, run_id)
    assert status == "interrupted" and "--job-id " + run_id in message and "Resume scoring here" in message
    assert stored_status(store, run_id) == "running"  # shown, never written: viewing a run changes nothing

    mark_running(store, run_id, pid=os.getpid(), host=here, age_s=5)  # this very process: alive
    assert shown_status(store, run_id)[0] == "running"
    mark_running(store, run_id, pid=dead_pid(), host="another-machine", age_s=60)  # cannot check its pid: trust it
    assert shown_status(store, run_id)[0] == "running"
    mark_running(store, run_id, pid=dead_pid(), host="another-machine", age_s=2 * 3600)  # silent for 2 h
    assert shown_status(store, run_id)[0] == "interrupted"


def test_every_committed_batch_updates_the_heartbeat(tmp_path):
    store, run_id = planned_store(tmp_path)
    mark_running(store, run_id, pid=os.getpid(), host=socket.gethostname(), age_s=600)
    old = store.run(run_id)["heartbeat"]
    pending = store.pending_ids(run_id)
    batch = pending.iloc[:4][["snippet_id"]].assign(score=1.0, n_tokens=W, truncated=False)
    store.write_scores(run_id, batch, fingerprint="fp", method="min_k_pp", params={}, code_version="t", session="s")
    beat = store.run(run_id)["heartbeat"]
    assert beat - old > pd.Timedelta(seconds=590)  # moved to about now


# texts read only for the snippets shown ----------------------------------------------------------
def test_results_carry_keys_and_scores_only_and_texts_are_fetched_by_id(tmp_path):
    store, run_id = planned_store(tmp_path)
    results = store.results(run_id)
    assert "text" not in results.columns
    assert set(results.columns) == {"snippet_id", "book", "role", "label", "position", "n_words", "score", "n_tokens",
                                    "truncated", "session", "computed_at"}
    # 4 calibration books of 4 snippets, audit books of 3 and 2
    assert len(results) == 4 * 4 + 3 + 2 and results["score"].isna().all()
    ids = ["audit-b#00001", "cal-j#00002", "audit-a#00000"]
    texts = store.snippet_texts(run_id, ids)
    assert list(texts.index) == ids
    assert list(texts) == [expected_text("b", 1), expected_text("j", 2), expected_text("a", 0)]
    with pytest.raises(KeyError, match="nope#00000"):
        store.snippet_texts(run_id, ["nope#00000"])


def test_results_read_in_chunks_equal_one_read_of_every_row(tmp_path, monkeypatch):
    store, run_id = planned_store(tmp_path)
    con = duckdb.connect(str(store.path))  # 5,000 more snippets of one audited book, half of them scored
    con.execute("INSERT INTO snippets SELECT ?, 'big#' || lpad(i::VARCHAR, 5, '0'), 'big', 'audit', NULL, i, 8, 'x' "
                "FROM range(5000) r(i)", [run_id])
    con.execute("INSERT INTO scores SELECT ?, 'big#' || lpad(i::VARCHAR, 5, '0'), i / 7, 9, false, 'fp', 'm', '{}', "
                "'t', 's', NULL FROM range(0, 5000, 2) r(i)", [run_id])
    whole = con.execute("""SELECT s.snippet_id, s.book, s.role, s.label, s.position, s.n_words, c.score, c.n_tokens,
                                  c.truncated, c.session, c.computed_at FROM snippets s LEFT JOIN scores c
                                  USING (run_id, snippet_id) WHERE s.run_id = ? ORDER BY s.role, s.book, s.position""",
                        [run_id]).df()
    con.close()
    monkeypatch.setattr("mia_core.runs.store_db.READ_CHUNK_VECTORS", 1)  # 2,048 rows a chunk: 3 chunks and a rest
    chunked = store.results(run_id)
    assert len(chunked) == 5000 + 4 * 4 + 3 + 2
    pd.testing.assert_frame_equal(chunked, whole)
    big = chunked[chunked["book"] == "big"]
    assert big["position"].tolist() == list(range(5000))
    assert big["score"].iloc[::2].tolist() == [i / 7 for i in range(0, 5000, 2)] and big["score"].iloc[1::2].isna().all()

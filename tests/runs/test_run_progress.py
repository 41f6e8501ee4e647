"""What the runs table and the progress line read while a job scores: status, counts and batch times, batch by batch."""
from __future__ import annotations

import threading

import pytest

from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit, run_scoring
from mia_core.audit.sources import Book
from mia_core.audit.timing import clock_text, progress_line
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

from tests.support.tiny import random_texts

SETTINGS = AuditSettings(method="min_k_pp", params={"k": 0.2}, snippet_words=10, n_boot=50, batch_snippets=3)


@pytest.fixture
def planned(llama_lm, tmp_path):
    """A run of 2 calibration books per label and 2 audit books, 30 words each: 3 snippets per book, 18 in all."""
    texts = random_texts(6, seed=4, min_words=30, max_words=30)
    calibration = [Book(f"c{i}", texts[i], "test", i % 2) for i in range(4)]
    books = [Book(f"b{i}", texts[4 + i], "test") for i in range(2)]
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, lm=llama_lm)
    return store, run_id


def test_runs_table_follows_the_job_batch_by_batch(llama_lm, planned):
    store, run_id = planned
    assert store.runs().set_index("run_id").loc[run_id, ["status", "n_scored", "n_snippets"]].tolist() == ["created", 0, 18]
    seen = []

    def progress(done: int, total: int) -> None:  # called after each committed batch, in the job's thread
        row = store.runs().set_index("run_id").loc[run_id]
        seen.append((done, total, row["status"], int(row["n_scored"]), store.run_progress(run_id)))

    job = threading.Thread(target=lambda: run_scoring(store, run_id, ModelRef.of(llama_lm), lm=llama_lm, progress=progress))
    job.start()
    job.join(120)
    assert [(d, t, s, n) for d, t, s, n, _ in seen] == [(3 * i, 18, "running", 3 * i) for i in range(1, 7)]
    for done, _, _, _, p in seen:
        assert (p.status, p.scored, p.planned, p.scored_before) == ("running", done, 18, 0)
        assert p.started_at is not None and p.started_at <= p.last_batch_at
    assert [p.last_batch_at for *_, p in seen] == sorted(p.last_batch_at for *_, p in seen)
    assert store.runs().set_index("run_id").loc[run_id, ["status", "n_scored"]].tolist() == ["scored", 18]
    audit_result(store, run_id)
    assert store.runs().set_index("run_id").loc[run_id, "status"] == "done"


def test_run_progress_of_a_resumed_run_counts_only_this_session(llama_lm, planned):
    store, run_id = planned

    def stop_after_two_batches(done: int, total: int) -> None:
        if done == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_scoring(store, run_id, ModelRef.of(llama_lm), lm=llama_lm, progress=stop_after_two_batches)
    stopped = store.run_progress(run_id)
    assert (stopped.status, stopped.scored, stopped.scored_before) == ("interrupted", 6, 0)

    lines = []
    run_scoring(store, run_id, ModelRef.of(llama_lm), lm=llama_lm, progress=lambda d, t: lines.append(store.run_progress(run_id)))
    assert [(p.scored, p.scored_before) for p in lines] == [(9, 6), (12, 6), (15, 6), (18, 6)]
    # the progress line, recomputed from the stored batch times (scores' computed_at) of this session only
    times = store.results(run_id)["computed_at"]
    p = lines[1]
    assert p.started_at > times.nsmallest(6).max()  # the session started after the first session's batches
    spent = (times[times >= p.started_at].nsmallest(6).max() - p.started_at).total_seconds()
    assert p.last_batch_at == times[times >= p.started_at].nsmallest(6).max()
    left = spent / 6 * (18 - 12)
    assert progress_line(p) == (f"12 of 18 snippets · {clock_text(spent)} elapsed · about {clock_text(max(left, 1))} left · "
                                "6 stored before (resumed)")

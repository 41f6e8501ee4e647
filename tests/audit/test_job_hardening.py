"""Book-audit jobs under faults: a reused job id with another plan, kill -9 while planning or scoring, outputs
that are all-or-nothing, and viewing a run that changes nothing stored."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pandas as pd
import pytest

from mia_core import LanguageModel
from mia_core.audit import report
from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit, run_scoring
from mia_core.audit.report import write_report
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.model.stats_cache import StatsCache
from mia_core.runs.store import ResultsStore
from mia_core.scoring import score_texts

from tests.support.books import words
from tests.support.cli_runner import run_cli
from tests.support.tiny import tiny_llama, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
W = 8  # words per snippet
SETTINGS = AuditSettings(snippet_words=W, n_boot=50, batch_snippets=4)
N_SNIPPETS = 4 * 4 + 3 + 2  # 4 calibration books of 4 snippets; audit books of 3 and 2


def library() -> tuple[list[Book], list[Book]]:
    """(books to audit, calibration books) of numbered words, one tag per book."""
    calibration = [Book(f"cal-{tag}", words(4 * W, tag), "test", label)
                   for tag, label in (("m", 1), ("n", 0), ("k", 1), ("j", 0))]
    return [Book("audit-a", words(3 * W, "a"), "test"), Book("audit-b", words(2 * W, "b"), "test")], calibration


def tiny_lm(cache: Path) -> LanguageModel:
    """An untrained tiny Llama: the same weights (so the same fingerprint) in every process."""
    tok = tiny_tokenizer(300)
    return LanguageModel(tiny_llama(len(tok), seed=0), tok, name="tiny", stats_cache=StatsCache(cache))


def expected_text(snippet_id: str) -> str:
    """The text of snippet `cal-m#00002` etc., written down from how the books were made."""
    book, position = snippet_id.split("#")
    tag, start = book.split("-")[1], int(position) * W
    return " ".join(f"{tag}{i}" for i in range(start, start + W))


def scored_store(path: Path) -> tuple[ResultsStore, str]:
    """A planned run with made-up scores (member calibration snippets higher), no model needed."""
    store = ResultsStore(path)
    books, calibration = library()
    run_id = plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, lm=SimpleNamespace(fingerprint="fp"))
    planned = store.results(run_id)
    rng = np.random.default_rng(0)
    scores = planned["label"].astype(float).fillna(0.5).to_numpy() + rng.normal(0, 0.3, len(planned))
    store.write_scores(run_id, planned[["snippet_id"]].assign(score=scores, n_tokens=W, truncated=False),
                       fingerprint="fp", method="min_k_pp", params={"k": 0.2}, code_version="t", session="s")
    return store, run_id


# reusing a job id ---------------------------------------------------------------------------------
def test_a_named_job_with_another_plan_is_refused_and_the_same_plan_resumes(tmp_path):
    store = ResultsStore(tmp_path / "r.duckdb")
    books, calibration = library()
    fake = SimpleNamespace(fingerprint="fp")
    assert plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, run_id="mine", lm=fake) == "mine"
    analysis_only = replace(SETTINGS, rule="accuracy", target_fpr=0.2, seed=3, batch_snippets=2)
    assert plan_audit(store, ModelRef("tiny"), books, calibration, analysis_only, run_id="mine", lm=fake) == "mine"

    edited = [books[0], Book("audit-b", words(2 * W, "z"), "test")]  # same names, other text
    relabelled = [replace(calibration[0], label=0), *calibration[1:]]
    refusals = {
        "audit books": (fake, edited, calibration, SETTINGS),
        "calibration books": (fake, books, relabelled, SETTINGS),
        "snippet_words 8 → 6": (fake, books, calibration, replace(SETTINGS, snippet_words=6)),
        "model": (SimpleNamespace(fingerprint="other"), books, calibration, SETTINGS),
    }
    for what, (lm, audit, cal, settings) in refusals.items():
        with pytest.raises(ValueError, match="job mine") as err:
            plan_audit(store, ModelRef("tiny"), audit, cal, settings, run_id="mine", lm=lm)
        assert what in str(err.value), (what, str(err.value))
    texts = store.snippet_texts("mine", ["audit-b#00000", "audit-b#00001"])
    assert list(texts) == [expected_text("audit-b#00000"), expected_text("audit-b#00001")]  # the old texts stay
    assert store.progress("mine") == (0, N_SNIPPETS)


def test_a_run_stored_before_plans_were_kept_is_checked_against_its_stored_snippets(tmp_path):
    store = ResultsStore(tmp_path / "r.duckdb")
    books, calibration = library()
    fake = SimpleNamespace(fingerprint="fp")
    plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, run_id="old", lm=fake)
    con = duckdb.connect(str(store.path))
    con.execute("UPDATE runs SET plan = NULL WHERE run_id = 'old'")  # as an older version stored it
    con.close()
    with pytest.raises(ValueError, match="audit books"):
        plan_audit(store, ModelRef("tiny"), [books[0], Book("audit-b", words(2 * W, "z"), "test")], calibration, SETTINGS,
                   run_id="old", lm=fake)
    assert plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, run_id="old", lm=fake) == "old"


def test_reusing_a_job_id_with_other_books_through_the_cli_is_exit_2(tmp_path):
    model = tmp_path / "model"
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=0).save_pretrained(model)
    tok.save_pretrained(model)
    books, calibration = library()
    pd.DataFrame({"book": [b.name for b in calibration], "text": [b.text for b in calibration],
                  "label": [b.label for b in calibration]}).to_csv(tmp_path / "cal.csv", index=False)
    common = ["audit-books", "--model", model, "--calibration", tmp_path / "cal.csv", "--snippet-words", W,
              "--n-boot", 100, "--output-dir", tmp_path / "out", "--store", tmp_path / "r.duckdb", "--job-id", "mine"]
    pd.DataFrame({"book": [b.name for b in books], "text": [b.text for b in books]}).to_csv(tmp_path / "a.csv", index=False)
    code, _, err = run_cli(*common, "--books", tmp_path / "a.csv")
    assert code == 0, err
    first = (tmp_path / "out" / "books.csv").read_bytes()
    pd.DataFrame({"book": [b.name for b in books], "text": [words(3 * W, "q"), words(2 * W, "r")]}).to_csv(
        tmp_path / "b.csv", index=False)
    code, _, err = run_cli(*common, "--books", tmp_path / "b.csv")
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: job mine") and "audit books" in err
    assert (tmp_path / "out" / "books.csv").read_bytes() == first  # the old report was not overwritten



@pytest.mark.parametrize("job_id", ["../../etc/x", "a b", "-rf", "x" * 65, "<b>run</b>", ""])
def test_a_job_id_that_is_no_run_id_is_refused_before_anything_is_read(tmp_path, job_id):
    books, calibration = library()
    pd.DataFrame({"book": [b.name for b in calibration], "text": [b.text for b in calibration],
                  "label": [b.label for b in calibration]}).to_csv(tmp_path / "cal.csv", index=False)
    pd.DataFrame({"book": [b.name for b in books], "text": [b.text for b in books]}).to_csv(tmp_path / "a.csv", index=False)
    code, _, err = run_cli("audit-books", "--model", tmp_path / "no-model-needed", "--calibration", tmp_path / "cal.csv",
                           "--books", tmp_path / "a.csv", "--snippet-words", W, "--output-dir", tmp_path / "out",
                           "--store", tmp_path / "r.duckdb", "--job-id", job_id)
    assert code == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: --job-id") and "Traceback" not in err
    assert not (tmp_path / "r.duckdb").exists() and not (tmp_path / "out").exists()  # refused before the store opened

# kill -9 while planning or scoring ----------------------------------------------------------------
WORKER = """
import os, signal, sys
from pathlib import Path
import mia_core.audit.jobs as jobs
import mia_core.runs.store as store_mod
from mia_core.model.options import ModelRef
from tests.audit.test_job_hardening import SETTINGS, library, tiny_lm

store_path, stage, cache = sys.argv[1:4]
die = lambda: os.kill(os.getpid(), signal.SIGKILL)
if stage == "plan":  # killed while planning, after its first snippets were committed (the run's row comes last)
    insert = store_mod._insert_missing
    store_mod._insert_missing = lambda *a, **k: (insert(*a, **k), die())
else:  # killed while scoring the third batch, after two were committed
    score, calls = jobs.score_snippets, []
    def killing(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            die()
        return score(*a, **k)
    jobs.score_snippets = killing
store = store_mod.ResultsStore(store_path)
books, calibration = library()
lm = tiny_lm(Path(cache))
run_id = jobs.plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, lm=lm)
jobs.run_scoring(store, run_id, ModelRef.of(lm), lm=lm)
print("not killed")
"""


def killed_worker(store_path: Path, stage: str, cache: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-c", WORKER, str(store_path), stage, str(cache)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stdout + proc.stderr[-3000:]  # it died by SIGKILL where we meant it to


def test_kill_9_while_planning_leaves_no_half_planned_run(tmp_path):
    path = tmp_path / "r.duckdb"
    killed_worker(path, "plan", tmp_path / "cache")
    store = ResultsStore(path)
    assert store.runs().empty  # not a run with 0 (or some) snippets: the run's row was never written
    books, calibration = library()
    lm = tiny_lm(tmp_path / "cache")
    plan_audit(store, ModelRef("tiny"), books, calibration, SETTINGS, lm=lm)
    assert store.runs()["n_snippets"].tolist() == [N_SNIPPETS]


def test_kill_9_while_scoring_then_resume_loses_and_duplicates_nothing(tmp_path):
    path = tmp_path / "r.duckdb"
    killed_worker(path, "score", tmp_path / "cache")
    store = ResultsStore(path)
    run_id = store.runs()["run_id"].iloc[0]
    status = store.run(run_id)
    assert status["status"] == "interrupted" and f"--job-id {run_id}" in status["message"]  # not "running" forever
    before = store.results(run_id).dropna(subset=["score"]).set_index("snippet_id")
    assert len(before) == 2 * SETTINGS.batch_snippets and before["session"].nunique() == 1

    lm = tiny_lm(tmp_path / "cache")
    assert run_scoring(store, run_id, ModelRef.of(lm), lm=lm) == N_SNIPPETS - len(before)
    after = store.results(run_id).set_index("snippet_id")
    con = duckdb.connect(str(path))
    rows, distinct = con.execute("SELECT count(*), count(DISTINCT snippet_id) FROM scores").fetchone()
    con.close()
    assert rows == distinct == N_SNIPPETS  # nothing lost, nothing twice
    pd.testing.assert_frame_equal(after.loc[before.index, ["score", "session", "computed_at"]],
                                  before[["score", "session", "computed_at"]])  # stored scores kept, not recomputed
    texts = [expected_text(i) for i in after.index]
    direct = score_texts(lm, texts, ["min_k_pp"], k=0.2, long_text="truncate")["min_k_pp"].to_numpy()
    np.testing.assert_allclose(after["score"].to_numpy(), direct, rtol=1e-6)
    assert store.run(run_id)["status"] == "scored"


# viewing and analysing ----------------------------------------------------------------------------
def test_viewing_a_run_with_other_analysis_settings_never_rewrites_its_config(tmp_path):
    store, run_id = scored_store(tmp_path / "r.duckdb")
    result = audit_result(store, run_id, replace(SETTINGS, rule="accuracy", target_fpr=0.2, seed=9))
    assert result.calibration.rule == "accuracy"
    assert store.run(run_id)["config"] == asdict(SETTINGS)
    assert "text" not in result.snippets.columns  # the analysis reads keys and scores only


def test_a_run_with_no_snippets_is_a_clear_error(tmp_path):
    store = ResultsStore(tmp_path / "r.duckdb")
    con = duckdb.connect(str(store.path))  # what a crash between two commits could leave before
    con.execute("INSERT INTO runs (run_id, kind, status, config, params) VALUES ('empty', 'book-audit', 'created', ?, "
                "'{}')", [json.dumps(asdict(SETTINGS))])
    con.close()
    with pytest.raises(ValueError, match="no snippets"):
        audit_result(store, "empty")


# all-or-nothing outputs ---------------------------------------------------------------------------
def test_outputs_are_all_or_nothing(tmp_path, monkeypatch):
    store, run_id = scored_store(tmp_path / "r.duckdb")
    result = audit_result(store, run_id)
    out = tmp_path / "out"
    paths = write_report(result, out)
    snippets = pd.read_csv(paths["snippets"])
    assert len(snippets) == N_SNIPPETS
    assert snippets["text"].tolist() == [expected_text(i) for i in snippets["snippet_id"]]
    top = result.snippets[result.snippets["role"] == "audit"].nlargest(1, "score")["snippet_id"].iloc[0]
    assert expected_text(top) in paths["report"].read_text()  # top snippets are fetched by id for the report
    before = {name: path.read_bytes() for name, path in paths.items()}

    changed = replace(result, books=result.books.assign(verdict="changed"))

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report, "_limits_section", broken)  # the report fails to render
    with pytest.raises(RuntimeError):
        write_report(changed, out)
    assert {name: path.read_bytes() for name, path in paths.items()} == before
    monkeypatch.undo()
    monkeypatch.setattr(ResultsStore, "snippet_texts", broken)  # the snippets table fails half-way through
    with pytest.raises(RuntimeError):
        write_report(changed, out)
    assert {name: path.read_bytes() for name, path in paths.items()} == before
    assert sorted(p.name for p in out.iterdir()) == ["books.csv", "report.html", "snippets.csv"]  # no temp files left
    monkeypatch.undo()
    write_report(changed, out)
    assert set(pd.read_csv(paths["books"])["verdict"]) == {"changed"}

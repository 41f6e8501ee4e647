"""The Book audit page's runs, progress and estimate (ui/audit_progress.py): reattaching to a running job, a job that
ends analysed, and the cost estimate before Run."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from mia_core import load_model
from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.sources import Book
from mia_core.audit.timing import ModelSpeed
from mia_core.model.options import ModelRef
from mia_core.model.stats_cache import StatsCache
from mia_core.runs.store import ResultsStore
from ui.audit_progress import demo_snippet_texts, first_batch
import ui.model_speeds as model_speeds_module
from ui.model_speeds import measurements, model_speeds
from ui.jobs import job_threads, start_job, start_scoring
from ui.models import LOADED, cached_model

from tests.support.tiny import random_texts

ESTIMATE_PAGE = '''
import streamlit as st

from mia_core.audit.jobs import AuditSettings
from ui.audit_progress import cost_estimate_ui

cost_estimate_ui(st.session_state["spec"], "demo-books", "demo-books", AuditSettings(max_snippets_per_book=None))
'''


@pytest.fixture
def store_path(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "results.duckdb"
    monkeypatch.setenv("MIA_LENS_STORE", str(path))
    return path


def small_run(store: ResultsStore, lm, spec: str) -> str:
    """A planned run of 2 calibration books per label and 2 audit books of 30 words (10-word snippets: 18)."""
    texts = random_texts(6, seed=5, min_words=30, max_words=30)
    calibration = [Book(f"c{i}", texts[i], "test", i % 2) for i in range(4)]
    books = [Book(f"b{i}", texts[4 + i], "test") for i in range(2)]
    settings = AuditSettings(method="loss", params={}, snippet_words=10, n_boot=50, batch_snippets=4)
    return plan_audit(store, ModelRef(spec), books, calibration, settings, lm=lm)


def test_a_fresh_session_without_a_run_link_shows_the_running_job(store_path, tiny_model_dir, tiny_app):
    run_id = small_run(ResultsStore(store_path), SimpleNamespace(fingerprint="fp"), str(tiny_model_dir))
    release = threading.Event()
    try:
        job = start_job(run_id, lambda: release.wait(60))
        deadline = time.time() + 10
        while job.state != "running" and time.time() < deadline:
            time.sleep(0.01)
        at = tiny_app("app_pages/audit.py")  # a new session; no ?run= in its address
        assert at.session_state["audit_run_id"] == run_id
        bars = [e.proto.text for e in at.get("progress")]
        assert bars == [f"Run {run_id}: 0 of 18 snippets"]
        assert at.query_params["run"] == run_id
    finally:
        release.set()
        job_threads().pop(run_id, None)


def test_a_link_to_another_run_wins_over_reattaching(store_path, tiny_model_dir, tiny_app):
    store = ResultsStore(store_path)
    running = small_run(store, SimpleNamespace(fingerprint="fp"), str(tiny_model_dir))
    other = small_run(store, SimpleNamespace(fingerprint="fp2"), str(tiny_model_dir))
    release = threading.Event()
    try:
        start_job(running, lambda: release.wait(60))
        at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=180)
        at.query_params["run"] = other
        at.switch_page("app_pages/audit.py").run()
        assert not at.exception, at.exception
        assert at.session_state["audit_run_id"] == other
    finally:
        release.set()
        job_threads().pop(running, None)


def test_a_page_job_ends_scored_and_analysed(store_path, tiny_model_dir):
    lm = load_model(str(tiny_model_dir))
    store = ResultsStore(store_path)
    run_id = small_run(store, lm, str(tiny_model_dir))
    try:
        job = start_scoring(store, run_id, lm)
        job.thread.join(120)
        assert job.error is None and job.state == "done"
        row = store.runs().set_index("run_id").loc[run_id]
        assert (row["status"], row["n_scored"], row["n_snippets"]) == ("done", 18, 18)
    finally:
        job_threads().pop(run_id, None)


def test_a_page_job_starts_with_a_batch_sized_from_the_measured_speed(store_path, tiny_model_dir):
    lm = load_model(str(tiny_model_dir))
    store = ResultsStore(store_path)
    run_id = small_run(store, lm, str(tiny_model_dir))
    spec = str(tiny_model_dir)
    model_speeds().pop(spec, None)
    try:
        assert first_batch(run_id, lm) == 1  # speed not measured on this server: the smallest batch
        # 10-word snippets × 1.25 tokens a word = 13 tokens × 0.5 s = 6.5 s a snippet: 20 s hold 3
        model_speeds()[spec] = ModelSpeed(seconds_per_token=0.5, tokens_per_word=1.25)  # a stubbed measurement
        assert first_batch(run_id, lm) == 3
        job = start_scoring(store, run_id, lm, first_batch(run_id, lm))
        job.thread.join(120)
        assert job.error is None and job.state == "done"
        batches = store.results(run_id).groupby("computed_at").size().sort_index().tolist()
        assert batches == [3, 4, 4, 4, 3]  # 3, then the run's batch_snippets (4) until the 18 are scored
    finally:
        model_speeds().pop(spec, None)
        job_threads().pop(run_id, None)


@pytest.fixture
def own_cache(tmp_path, tiny_model_dir):
    """The page's tiny model (the one object `cached_model` shares) with a statistics cache of this test's own, so what
    other tests (or earlier runs) cached never changes an estimate here; the model's own cache is put back after."""
    lm = cached_model(str(tiny_model_dir))
    shared, lm.stats_cache = lm.stats_cache, StatsCache(tmp_path / "stats")
    yield lm
    lm.stats_cache = shared


def estimate_page(tmp_path: Path, spec: str, loaded: bool) -> AppTest:
    script = tmp_path / "estimate.py"
    script.write_text(ESTIMATE_PAGE)
    at = AppTest.from_file(str(script), default_timeout=120)
    at.session_state["spec"] = spec
    if loaded:
        at.session_state[LOADED] = spec
    return at.run()


def test_cost_estimate_is_snippets_times_tokens_times_seconds_per_token(tmp_path, tiny_model_dir, own_cache):
    spec = str(tiny_model_dir)
    model_speeds()[spec] = ModelSpeed(seconds_per_token=0.005, tokens_per_word=1.25)  # a stubbed measurement
    try:
        at = estimate_page(tmp_path, spec, loaded=True)
        assert not at.exception, at.exception
        # demo plays: 4 calibration + 8 audit plays of 3,000 words → 5 snippets of 512 words each = 60;
        # 512 × 1.25 = 640 tokens; 60 × 640 × 0.005 s = 192 s
        assert [c.value for c in at.caption] == [
            f"Estimate: 60 snippets × about 640 tokens × 5 ms per token ({spec} on this machine, measured once) "
            "≈ about 3 min of scoring."]
        assert not estimate_page(tmp_path, spec, loaded=False).caption  # nothing before the sidebar's model loaded
    finally:
        model_speeds().pop(spec, None)


def test_cost_estimate_measures_a_model_once_in_the_background(tmp_path, tiny_model_dir, own_cache):
    """The page is drawn before the speed is known (it says the estimate follows); the measurement runs once, in a
    thread, and the next run draws the estimate."""
    spec = str(tiny_model_dir)
    model_speeds().pop(spec, None)
    try:
        at = estimate_page(tmp_path, spec, loaded=True)
        assert not at.exception, at.exception
        if spec not in model_speeds():  # still measuring when the page was drawn
            assert at.caption[0].value.startswith("60 snippets; the time estimate follows in a moment")
        measuring = measurements()[spec]["thread"]
        measuring.join(120)
        at = estimate_page(tmp_path, spec, loaded=True)
        assert not at.exception, at.exception
        speed = model_speeds()[spec]
        assert speed.seconds_per_token > 0 and speed.tokens_per_word > 0
        assert at.caption[0].value.startswith("Estimate: 60 snippets × about ")
        estimate_page(tmp_path, spec, loaded=True)
        assert model_speeds()[spec] is speed  # measured once per model on this server
    finally:
        model_speeds().pop(spec, None)


def test_a_slow_measurement_never_holds_the_page(tmp_path, tiny_model_dir, monkeypatch, own_cache):
    """A model whose speed takes 20 s to measure: the page is drawn at once with the placeholder, and again at once
    while the measurement runs (one measurement, not one per rerun)."""
    spec = str(tiny_model_dir)
    model_speeds().pop(spec, None)
    measurements().pop(spec, None)
    release, started = threading.Event(), []

    def slow(lm):
        started.append(lm)
        release.wait(20)
        return ModelSpeed(seconds_per_token=0.005, tokens_per_word=1.25)
    monkeypatch.setattr(model_speeds_module, "measure_speed", slow)
    try:
        for _ in range(2):
            begun = time.monotonic()
            at = estimate_page(tmp_path, spec, loaded=True)
            assert time.monotonic() - begun < 10 and not at.exception, at.exception
            assert at.caption[0].value.startswith("60 snippets; the time estimate follows in a moment")
        assert len(started) == 1  # measured once, in the background
        release.set()
        measurements()[spec]["thread"].join(30)
        assert estimate_page(tmp_path, spec, loaded=True).caption[0].value.startswith("Estimate: 60 snippets × about")
    finally:
        release.set()
        model_speeds().pop(spec, None)
        measurements().pop(spec, None)


def test_the_estimate_counts_snippets_already_in_the_statistics_cache(tmp_path, tiny_model_dir, own_cache):
    """Snippets whose statistics are cached are read, not computed: the estimate leaves them out and says so."""
    spec, lm = str(tiny_model_dir), own_cache
    model_speeds()[spec] = ModelSpeed(seconds_per_token=0.005, tokens_per_word=1.25)  # a stubbed measurement
    try:
        texts = demo_snippet_texts(512, None)
        assert len(texts) == 60  # the demo plays' 512-word snippets, calibration and audited
        lm.token_stats(texts[:12], "auto", long_text="truncate")  # as an audit scores them: 12 now cached
        assert lm.cached_count(texts, "auto", "truncate") == 12
        at = estimate_page(tmp_path, spec, loaded=True)
        assert not at.exception, at.exception
        # 48 snippets × 640 tokens × 0.005 s
        assert at.caption[0].value.startswith(
            "Estimate: 48 of 60 snippets to score (12 already in this server's statistics cache) "
            "× about 640 tokens × 5 ms per token"), at.caption[0].value
    finally:
        model_speeds().pop(spec, None)

"""The Book audit page through AppTest: a background run that survives reruns, reattaching by id, results."""
from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mia_core import datasets
from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.sources import read_books, read_calibration
from mia_core.runs.store import ResultsStore

from tests.support.app import APP

pytestmark = pytest.mark.integration  # the page loads the cached demo model


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    path = tmp_path / "results.duckdb"
    monkeypatch.setenv("MIA_LENS_STORE", str(path))
    return path


def table_with(at: AppTest, column: str):
    """The first dataframe shown with this column (AppTest does not expose dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def audit_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["model_choice"] = "demo-known"  # chosen before the first run (sidebar reruns, see test_home)
    at.run()
    at.switch_page("app_pages/audit.py").run()
    assert not at.exception, at.exception
    return at


def wait_until_scored(path: Path, run_id: str, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        scored, planned = ResultsStore(path).progress(run_id)
        if planned and scored == planned:
            return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish in {timeout} s")


def test_audit_runs_in_the_background_and_a_new_session_reattaches(store_path):
    at = audit_page()
    at.number_input(key="audit_words").set_value(64)
    at.number_input(key="audit_max").set_value(2)
    at.button(key="audit_run").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["audit_run_id"]
    at.run()  # a rerun while the job works: the page keeps the run and shows progress or results
    assert not at.exception and at.session_state["audit_run_id"] == run_id
    wait_until_scored(store_path, run_id)

    at.run()
    assert not at.exception, at.exception
    books = table_with(at, "verdict")
    assert len(books) == 8 and {"rate", "prevalence", "p_adj", "verdict"} <= set(books.columns)
    assert all("proof" not in v for v in books["verdict"])
    labels = datasets.load("demo-books").set_index("id")["label"]
    prevalence = books.assign(label=books["book"].map(labels)).groupby("label")["prevalence"].mean()
    assert prevalence[1] > prevalence[0]  # demo-known was trained on the member plays
    assert len(at.get("plotly_chart")) >= 3  # calibration ROC, books, snippet scores of one book
    assert any('class="mia-heatmap"' in h.proto.body for h in at.get("html"))
    assert len(at.get("download_button")) == 3

    fresh = audit_page()  # another session: nothing in its state, the run is found in the shared store
    assert run_id in table_with(fresh, "run_id")["run_id"].tolist()
    fresh.selectbox(key="audit_open").set_value(run_id).run()
    fresh.button(key="audit_open_button").click().run()
    assert not fresh.exception, fresh.exception
    assert len(table_with(fresh, "verdict")) == 8
    fresh.radio(key="audit_rule").set_value("accuracy").run()  # re-analysed without re-scoring
    assert not fresh.exception, fresh.exception
    assert any(m.label == "Threshold" for m in fresh.metric)
    assert ResultsStore(store_path).runs()["n_scored"].iloc[0] == ResultsStore(store_path).progress(run_id)[1]


def scored_cli_run(path: Path, method: str) -> str:
    """A finished run of the demo books as the CLI could store it, with made-up scores (members higher)."""
    store = ResultsStore(path)
    settings = AuditSettings(method=method, params={}, snippet_words=64, max_snippets_per_book=1, n_boot=50)
    run_id = plan_audit(store, SimpleNamespace(fingerprint="cli"), "demo-known", read_books("demo-books")[0],
                        read_calibration("demo-books")[0], settings)
    planned = store.pending(run_id)
    noise = np.random.default_rng(0).normal(0, 0.1, len(planned))
    scores = planned[["snippet_id"]].assign(score=planned["label"].astype(float).fillna(0.5).to_numpy() + noise,
                                            n_tokens=64, truncated=False)
    store.write_scores(run_id, scores, fingerprint="cli", method=method, params={}, code_version="test", session="test")
    return run_id


def test_a_run_whose_method_has_no_token_view_shows_its_snippets_as_text(store_path):
    run_id = scored_cli_run(store_path, "lowercase")  # needs a lowercased pass: no heatmap from the statistics
    at = audit_page()
    at.session_state["audit_run_id"] = run_id
    at.run()
    assert not at.exception, at.exception
    assert any("no per-token view" in c.value for c in at.caption)
    assert not any('class="mia-heatmap"' in h.proto.body for h in at.get("html"))
    assert len(at.get("download_button")) == 3

"""The Book audit page through AppTest: a background run that survives reruns, reattaching by id, results."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mia_core import datasets
from mia_core.audit.store import ResultsStore

APP = str(Path(__file__).resolve().parents[1] / "app.py")
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
    at.session_state["model_choice"] = "demo-known"  # chosen before the first run (sidebar reruns, see test_dashboard)
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

"""The Benchmark page through AppTest: ROC and metrics on the demo set, and fitting GDS on a seeded split."""
from __future__ import annotations

import json
import shlex

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.app import APP, app
from tests.support.cli_runner import run_cli

pytestmark = pytest.mark.integration  # the page loads the cached demo model


def test_benchmark_on_the_demo_set_draws_roc_and_metrics():
    at = app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(10).run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k_pp"]).run()
    at.button(key="bench_run").click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["method"])[:2] == ["loss", "min_k_pp"] and table["AUROC"].between(0, 1).all()
    assert len(at.get("plotly_chart")) == 2
    at.toggle(key="bench_log").set_value(True).run()
    assert not at.exception


def test_benchmark_page_gds_option():
    """The Benchmark page fits GDS on a seeded split of the demo set and says so."""
    at = AppTest.from_file(APP, default_timeout=900).run()
    at.switch_page("app_pages/benchmark.py").run()
    at.number_input(key="bench_n").set_value(20).run()
    at.multiselect(key="bench_methods").set_value(["loss"]).run()
    at.checkbox(key="bench_gds").check().run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["method"])[:2] == ["loss", "gds"] and table["AUROC"][:2].between(0, 1).all()
    notes = " ".join(i.value for i in at.info)
    assert "supervised" in notes and "12 texts" in notes and "28 held-out" in notes and "seed 0" in notes
    fitted = at.session_state["gds_classifier"]  # kept for Explore, tied to the model it was fitted on
    assert fitted["model"] == at.session_state["model_spec"] and fitted["classifier"].spec["split"]["n_train"] == 12


def test_benchmark_run_shows_the_command_that_reproduces_it(tmp_path, monkeypatch):
    """The page's run block and `mia eval …` line: run in a terminal, the command gives the page's numbers."""
    at = app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(12).run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k_pp"]).run()
    at.slider(key="bench_k").set_value(0.3).run()
    at.button(key="bench_run").click().run()
    assert not at.exception
    command = at.code[0].value
    assert command.startswith("mia eval --model demo --input demo-wiki --methods loss,min_k_pp --k 0.3")
    assert "--per-class 12" in command
    report = at.session_state["bench_result"]["report"]
    assert report["run"]["fingerprint"] and report["run"]["code_version"] and report["run"]["seed"] == 0
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(*shlex.split(command)[1:])
    assert code == 0, err
    again = json.loads((tmp_path / "metrics.json").read_text())
    table = at.dataframe[0].value.set_index("method")
    for name in ("loss", "min_k_pp"):
        assert again[name]["auroc"] == pytest.approx(table.loc[name, "AUROC"], abs=1e-12)
    assert again["n_members"] == again["n_nonmembers"] == 12

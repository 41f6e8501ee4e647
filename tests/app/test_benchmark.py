"""The Benchmark page through AppTest: ROC and metrics on the demo set, fitting a supervised method (GDS) on a seeded
split, and helper texts split off the labelled set."""
from __future__ import annotations

import json
import shlex

import pytest
from streamlit.testing.v1 import AppTest

from mia_core import METHODS, datasets
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
    assert list(table["method"])[:2] == [METHODS["loss"].label, METHODS["min_k_pp"].label]
    assert table["AUROC"].between(0, 1).all()
    blind = at.dataframe[1].value  # the model-free attacks on the same texts, in their own table
    assert set(blind["blind attack (no model)"]) == {"tfidf_logreg", "bow_trees", "dates"}
    best = blind["AUROC"].max()
    assert list(blind.loc[blind["AUROC"] == best, ""])[0] == "the blind baseline (best)"
    assert table["AUROC above blind"].to_numpy() == pytest.approx(table["AUROC"].to_numpy() - max(best, 0.5))
    assert len(at.get("plotly_chart")) == 2
    at.toggle(key="bench_log").set_value(True).run()
    assert not at.exception


def test_benchmark_page_fits_a_chosen_supervised_method():
    """Choosing GDS (supervised) brings the training-share controls; the page fits it on a seeded split of the demo
    set, evaluates every method on the held-out rest and says so. 10 texts per class at a 0.6 share: the fewest that
    give GDS its 6 members and 6 non-members to learn from (each text costs GDS a forward and a backward pass)."""
    at = AppTest.from_file(APP, default_timeout=900).run()
    at.switch_page("app_pages/benchmark.py").run()
    at.number_input(key="bench_n").set_value(10).run()
    at.multiselect(key="bench_methods").set_value(["loss"]).run()
    assert "bench_fit_fraction" not in {s.key for s in at.slider}  # no supervised method chosen: no split
    at.multiselect(key="bench_methods").set_value(["loss", "gds"]).run()
    assert at.slider(key="bench_fit_fraction").value == 0.3 and at.number_input(key="bench_fit_seed").value == 0
    at.slider(key="bench_fit_fraction").set_value(0.6).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table["method"])[:2] == [METHODS["loss"].label, METHODS["gds"].label]
    assert table["AUROC"][:2].between(0, 1).all()
    notes = " ".join(i.value for i in at.info)
    assert "supervised" in notes and "12 texts" in notes and "other 8 held-out texts" in notes and "seed 0" in notes
    fitted = at.session_state["supervised_fits"]  # kept for Explore, tied to the model it was fitted on
    assert fitted["model"] == at.session_state["model_spec"]
    assert fitted["methods"]["gds"].spec["split"]["n_train"] == 12
    assert "--fit 0.6 --fit-seed 0" in at.code[0].value


def test_benchmark_run_shows_the_command_that_reproduces_it(tmp_path, monkeypatch):
    """The page's run block and `mia eval …` line: run in a terminal, the command gives the page's numbers."""
    at = app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(12).run()
    at.multiselect(key="bench_methods").set_value(["loss", "min_k_pp"]).run()
    at.toggle(key="bench_k_same").set_value(True).run()  # else each method keeps its own k (no --k)
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
        assert again[name]["auroc"] == pytest.approx(table.loc[METHODS[name].label, "AUROC"], abs=1e-12)
    assert again["n_members"] == again["n_nonmembers"] == 12


def test_benchmark_asks_for_helper_texts_only_when_a_chosen_method_needs_them():
    """Recall brings the "Helper texts" section (split settings by default, uploads as the alternative); every chosen
    method's access and cost show before the run; SURP keeps its own k unless one k is asked for."""
    at = app("app_pages/benchmark.py")
    at.multiselect(key="bench_methods").set_value(["loss", "surp"]).run()
    assert not {"bench_n_shots", "bench_helper_seed"} & {w.key for w in at.number_input}
    assert any(f"SURP {METHODS['surp'].params().k:g}" in c.value for c in at.caption)
    at.multiselect(key="bench_methods").set_value(["loss", "recall"]).run()
    assert at.number_input(key="bench_n_shots").value == 10 and at.number_input(key="bench_helper_seed").value == 0
    assert "bench_ref_fraction" not in {s.key for s in at.slider}  # ReCaLL has no reference population
    assert any("scored by no method" in c.value for c in at.caption)
    listed = " ".join(m.value for m in at.markdown)
    assert METHODS["recall"].cost in listed and "known non-members" in listed and "Helper texts" in listed
    at.multiselect(key="bench_methods").set_value(["loss", "recall", "camia"]).run()
    assert at.slider(key="bench_ref_fraction").value == 0.3
    at.radio(key="bench_helper_source").set_value("Upload files of known texts").run()
    assert not at.exception and at.button(key="bench_run").disabled  # nothing uploaded yet
    assert any("Still to upload" in c.value and "reference population" in c.value for c in at.caption)


def test_benchmark_splits_helper_texts_off_and_repeats_the_split(tiny_app, tmp_path, monkeypatch):
    """The split settings reach `evaluate_methods`: the helper rows are labelled non-members, scored by no method,
    named on the page, and the printed command repeats the run to the last digit."""
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(6).run()
    at.multiselect(key="bench_methods").set_value(["loss", "recall", "camia"]).run()
    at.number_input(key="bench_n_shots").set_value(1).run()
    at.slider(key="bench_ref_fraction").set_value(0.5).run()
    at.number_input(key="bench_helper_seed").set_value(3).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    result = at.session_state["bench_result"]
    report = result["report"]
    assert report["run"]["helper_split"] == {"n_shots": 1, "reference_fraction": 0.5, "seed": 3}
    shots, reference = report["helpers"]["shots_nonmembers"]["ids"], report["helpers"]["reference"]["ids"]
    assert len(shots) == 1 and len(reference) == 3  # round(0.5 · 6 non-members), after the shot
    data = datasets.sample_per_class(datasets.load("demo-wiki"), 6)
    label = dict(zip(data["id"], data["label"]))
    scored = result["data"]["id"].tolist()
    assert all(label[i] == 0 for i in shots + reference) and not set(shots) & set(reference)
    assert sorted(scored + shots + reference) == sorted(data["id"]) and not set(scored) & set(shots + reference)
    assert result["all_scores"]["id"].tolist() == scored and report["n_members"] == 6 and report["n_nonmembers"] == 2
    notes = " ".join(i.value for i in at.info)
    assert "scored by no method" in notes and "split off demo-wiki (seed 3)" in notes
    command = at.code[0].value
    assert "--param n_shots=1 --n-shots 1 --reference-fraction 0.5 --helper-seed 3" in command
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(*shlex.split(command)[1:])
    assert code == 0, err
    again = json.loads((tmp_path / "metrics.json").read_text())
    table = at.dataframe[0].value.set_index("method")
    for name in ("loss", "recall", "camia"):
        assert again[name]["auroc"] == pytest.approx(table.loc[METHODS[name].label, "AUROC"], abs=1e-12)
    assert again["helpers"]["reference"]["ids"] == reference

"""One evaluation path: `evaluate_methods` scores, holds out a supervised split, records a run block, and the
`mia eval` command it prints reproduces the same numbers."""
from __future__ import annotations

import json
import math
import shlex

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from mia_core import load_model, score_texts
from mia_core.blind import ATTACKS, blind_baseline
from mia_core.evaluation import (FitSplit, above_blind, evaluate_frame, evaluate_methods, format_report, json_safe,
                                 reproduce_command)
from mia_core.version import code_version
from tests.support.cli_runner import run_cli


@pytest.fixture(scope="module")
def saved(membership, tmp_path_factory):
    """The known-membership toy model saved to a folder, and its 80 labelled texts as a CSV."""
    folder = tmp_path_factory.mktemp("membership-model")
    membership["lm"].model.save_pretrained(folder)
    membership["lm"].tokenizer.save_pretrained(folder)
    texts = membership["members"] + membership["nonmembers"]
    data = pd.DataFrame({"id": [f"t{i}" for i in range(80)], "text": texts, "label": [1] * 40 + [0] * 40})
    csv = folder / "labelled.csv"
    data.to_csv(csv, index=False)
    return folder, csv, data


def test_scores_held_out_rows_and_run_block(saved, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    folder, csv, data = saved
    lm = load_model(str(folder), device="cpu")
    result = evaluate_methods(lm, data, ["loss", "min_k", "gds"], k=0.3, fit=FitSplit(0.5, seed=1), n_boot=200, seed=3,
                              source=str(csv))
    labels = data["label"].to_numpy()
    held = result.held_out
    assert held.sum() == 40 and labels[held].sum() == 20  # the GDS split's test rows, stratified
    assert result.scores["in_training_split"].tolist() == (~held).tolist()
    direct = score_texts(lm, data["text"].tolist(), ["loss", "min_k"], k=0.3)
    for name in ("loss", "min_k"):  # every method on the held-out rows only, scores as score_texts gives them
        np.testing.assert_allclose(result.scores[name], direct[name], rtol=1e-12)
        assert result.report[name]["auroc"] == pytest.approx(roc_auc_score(labels[held], direct[name][held]), abs=1e-12)
    assert result.report["gds"]["auroc"] == pytest.approx(roc_auc_score(labels[held], result.scores["gds"][held]),
                                                          abs=1e-12)
    # the blind attacks see the held-out rows only, with the run's seed; "above blind" is the plain difference
    baseline = blind_baseline(data["text"][held].tolist(), labels[held], seed=3)
    assert result.report["blind_baseline"] == json_safe(baseline) and list(baseline["attacks"]) == list(ATTACKS)
    for name in ("loss", "min_k"):
        assert result.report[name]["auroc_above_blind"] == pytest.approx(
            roc_auc_score(labels[held], direct[name][held]) - baseline["auroc"], abs=1e-12)
    assert result.report["n_members"] == 20 and result.report["split"]["n_train"] == 40
    run = result.report["run"]
    assert run["fingerprint"] == lm.fingerprint and run["spec"] == str(folder) and run["code_version"] == code_version()
    assert run["seed"] == 3 and run["fit"]["seed"] == 1 and run["methods"] == ["loss", "min_k", "gds"]
    assert run["excluded_training_rows"] == 40 and run["fit"]["methods"] == ["gds"]
    json.dumps(result.report, allow_nan=False)  # strict JSON: NaN became null


def test_printed_command_reproduces_the_numbers(saved, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder, csv, data = saved
    lm = load_model(str(folder), device="cpu")
    result = evaluate_methods(lm, data, ["loss", "zlib", "min_k_pp", "gds"], k=0.25, fit=FitSplit(0.5, seed=2), n_boot=200,
                              seed=5, source=str(csv))
    command = reproduce_command(result.report["run"])
    assert command.startswith(f"mia eval --model {folder} --input {csv} --methods loss,zlib,min_k_pp,gds --k 0.25")
    assert "--dtype float32" in command and "--fit 0.5 --fit-seed 2" in command
    code, out, err = run_cli(*shlex.split(command)[1:])
    assert code == 0, err
    again = json.loads((tmp_path / "metrics.json").read_text())
    for name in ("loss", "zlib", "min_k_pp", "gds"):
        assert again[name]["auroc"] == pytest.approx(result.report[name]["auroc"], abs=1e-12)
        assert again[name]["auroc_ci"] == pytest.approx(result.report[name]["auroc_ci"], abs=1e-12)
    assert again["run"]["command"] == command
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert scores["in_training_split"].sum() == 40 and len(scores) == 80


def test_json_safe_turns_non_finite_and_numpy_values_into_json():
    value = {"a": float("nan"), "b": [np.float64(1.5), np.int64(2), float("inf")], 3: np.array([0.5])}
    assert json_safe(value) == {"a": None, "b": [1.5, 2, None], "3": [0.5]}


def test_command_of_a_gds_only_run_reproduces_it(saved, tmp_path, monkeypatch):
    """A run fitting GDS alone (the CLI's `--fit`, the Benchmark page) prints a command that runs (methods: gds)."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    folder, csv, data = saved
    code, _, err = run_cli("eval", "--model", folder, "--input", csv, "--methods", "gds", "--fit", "0.5", "--param",
                           "max_tokens=64", "--output", tmp_path / "gds.json", "--n-boot", "200")
    assert code == 0, err
    first = json.loads((tmp_path / "gds.json").read_text())
    assert "--methods gds" in first["run"]["command"] and "--param max_tokens=64" in first["run"]["command"]
    code, _, err = run_cli(*shlex.split(first["run"]["command"])[1:])
    assert code == 0, err
    again = json.loads((tmp_path / "metrics.json").read_text())
    assert again["gds"]["auroc"] == pytest.approx(first["gds"]["auroc"], abs=1e-12)
    assert again["split"] == first["split"]


def test_evaluate_frame_reports_auroc_above_blind_and_every_attack():
    """Members mention a year ≤ 2016, non-members one ≥ 2023: a score that reads the year is perfect, and so
    is the blind baseline, so the method is 0 above blind and the report warns, naming the attack."""
    rng = np.random.default_rng(5)
    years = np.r_[rng.integers(1960, 2017, 40), rng.integers(2023, 2026, 40)]
    texts = [f"{' '.join(rng.choice(['river', 'castle', 'engine', 'meadow', 'comet'], 10))} in {y}." for y in years]
    labels = np.r_[np.ones(40, int), np.zeros(40, int)]
    scores = pd.DataFrame({"year": -years.astype(float), "noise": rng.normal(size=80)})
    report = json_safe(evaluate_frame(scores, labels, texts, n_boot=50, seed=0))
    baseline = report["blind_baseline"]
    assert baseline["auroc"] >= 0.95 and baseline["auroc"] == max(a["auroc"] for a in baseline["attacks"].values())
    for name in ("year", "noise"):
        expected = roc_auc_score(labels, scores[name]) - baseline["auroc"]
        assert report[name]["auroc_above_blind"] == pytest.approx(expected, abs=1e-12)
    assert report["year"]["auroc"] == 1.0
    [warning] = report["warnings"]
    assert warning.startswith(f"blind baseline ({baseline['best']}: ") and "> 0.6" in warning
    printed = format_report(report, ["year", "noise"]).splitlines()
    assert printed[0].endswith("above blind")
    assert printed[1].startswith("year") and printed[1].endswith(f"{1.0 - baseline['auroc']:+11.3f}")
    assert printed[2].endswith(f"{report['noise']['auroc_above_blind']:+11.3f}")
    assert printed[3].startswith("blind") and f"{baseline['auroc']:6.3f}" in printed[3]
    for line, name in zip(printed[4:4 + len(ATTACKS)], ATTACKS):
        assert name in line and f"{baseline['attacks'][name]['auroc']:6.3f}" in line
        assert line.endswith("<- the blind baseline") == (name == baseline["best"])


def test_above_blind_is_measured_from_chance_when_the_blind_baseline_is_below_it():
    """The issue's case: a blind baseline of 0.375 made a chance-level method (0.533) look +0.158 above blind."""
    assert above_blind(0.533, 0.375) == pytest.approx(0.033, abs=1e-12)
    assert above_blind(0.9, 0.7) == pytest.approx(0.2, abs=1e-12)  # above chance: the plain difference
    assert above_blind(0.45, 0.5) == pytest.approx(-0.05, abs=1e-12)
    assert math.isnan(above_blind(0.8, math.nan)) and math.isnan(above_blind(math.nan, 0.6))


def test_progress_counts_texts_as_their_batches_come_back(saved, tmp_path, monkeypatch):
    """on_texts says "n of 80 texts" from 0 to 80, never backwards, batch by batch, with the time left once the pass
    has a pace; the second run reads cached statistics: all 80 back at once."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    folder, _, data = saved
    lm = load_model(str(folder), device="cpu")
    seen = []
    evaluate_methods(lm, data, ["loss", "zlib"], n_boot=50, on_texts=seen.append)
    done = [p.done for p in seen]
    assert done[0] == 0 and done[-1] == 80 and all(p.total == 80 for p in seen) and done == sorted(done)
    assert len(set(done)) > 2  # more than one batch: counted as they finish, not only at the end
    assert seen[-1].words() == "80 of 80 texts" and any(p.eta_s is not None for p in seen if p.done < 80)
    again = []
    evaluate_methods(lm, data, ["loss"], n_boot=50, on_texts=again.append)
    assert again[0].done == 0 and {p.done for p in again[1:]} == {80}  # no model pass: one jump

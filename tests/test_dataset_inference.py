"""Dataset inference: clipping, z-scoring and the t-test against naive recomputations, calibration under the null
(a simulation with known truth), power on a planted signal, edge cases, features vs the methods' own scores, the CLI,
the Book audit section on a tiny run."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats
from streamlit.testing.v1 import AppTest

from mia_core import load_model, score_texts
from mia_core.audit.jobs import AuditSettings, plan_audit, run_scoring
from mia_core.audit.sources import Book
from mia_core.dataset_inference import (
    DI_KS, DiSettings, clip_outliers, dataset_inference, false_positive_check, feature_table, n_train_for, normalise,
    run_test, split_validation,
)
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, save_tiny_model

FAST = DiSettings(n_shuffles=3, epochs=200)


def naive_clip(column: list[float]) -> list[float]:
    """The reference's clip, by hand: c = int(n·0.05/2); the c lowest → the c-th lowest, the c highest → the c-th
    highest."""
    n = len(column)
    c = int(n * 0.05 / 2)
    if c == 0:
        return list(column)
    ranked = sorted(range(n), key=lambda i: column[i])
    out = list(column)
    for i in ranked[:c]:
        out[i] = column[ranked[c - 1]]
    for i in ranked[n - c:]:
        out[i] = column[ranked[n - c]]
    return out


def naive_student_p(a: list[float], b: list[float]) -> tuple[float, float]:
    """One-sided (a > b) Student t-test with the pooled variance, written out."""
    na, nb = len(a), len(b)
    ma, mb = sum(a) / na, sum(b) / nb
    ssa, ssb = sum((x - ma) ** 2 for x in a), sum((x - mb) ** 2 for x in b)
    pooled = (ssa + ssb) / (na + nb - 2)
    t = (ma - mb) / math.sqrt(pooled * (1 / na + 1 / nb))
    return t, float(scipy_stats.t.sf(t, na + nb - 2))


def gaussian(n: int, d: int, seed: int, shift: float = 0.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(rng.normal(size=(n, d)) + shift, columns=[f"f{i}" for i in range(d)])


def test_clipping_matches_the_reference_rule_by_hand():
    rng = np.random.default_rng(1)
    values = rng.standard_t(2, size=(120, 3))  # heavy tails: c = 3 values clipped at each end
    got = clip_outliers(values)
    for j in range(3):
        assert got[:, j].tolist() == naive_clip(values[:, j].tolist())
    assert (got != values).sum() == 2 * (3 - 1) * 3  # the c-th value itself stays: 2 moved per end and column
    short = rng.normal(size=(39, 2))
    np.testing.assert_array_equal(clip_outliers(short), short)  # n < 40: c = 0, nothing clipped


def test_normalisation_uses_the_suspect_sets_statistics_and_drops_constant_features():
    s = np.array([[1.0, 5.0, 2.0], [2.0, 5.0, 4.0], [4.0, 5.0, 9.0]])
    v = np.array([[3.0, 1.0, 0.0], [0.0, 7.0, 1.0]])
    zs, zv, keep = normalise(s, v)
    assert keep.tolist() == [True, False, True]
    mean0, mean2 = 7 / 3, 5.0
    sd0 = math.sqrt(((1 - mean0) ** 2 + (2 - mean0) ** 2 + (4 - mean0) ** 2) / 3)  # population std, as np.std
    sd2 = math.sqrt(((2 - 5) ** 2 + (4 - 5) ** 2 + (9 - 5) ** 2) / 3)
    assert zs[:, 0] == pytest.approx([(x - mean0) / sd0 for x in (1, 2, 4)])
    assert zv[:, 1] == pytest.approx([(0 - mean2) / sd2, (1 - mean2) / sd2])


def test_one_feature_p_values_match_a_naive_t_test_on_the_recorded_shuffles():
    # with one feature the held-out scores −logit are a positive affine map of the z-scored feature (the model learns
    # w < 0 on this strong signal), so Student's t on the clipped feature values reproduces every shuffle's p-value
    suspect, validation = gaussian(50, 1, 2, shift=0.8), gaussian(44, 1, 3)
    result = run_test(suspect, validation, FAST)
    assert result.n_train == 22 and result.clipped == [1, 1]
    s, v = naive_clip(suspect["f0"].tolist()), naive_clip(validation["f0"].tolist())
    for seed, p, t in zip(result.seeds, result.p_values, result.t_statistics):
        held_s = [s[i] for i in np.random.default_rng(seed).permutation(50)[22:]]
        held_v = [v[i] for i in np.random.default_rng([seed, 1]).permutation(44)[22:]]
        t_naive, p_naive = naive_student_p(held_s, held_v)
        assert t == pytest.approx(t_naive, rel=1e-6) and p == pytest.approx(p_naive, rel=1e-6)
    assert result.p_value == pytest.approx(float(np.median(result.p_values)))
    assert result.member_weights["f0"] > 0


def test_orientation_scores_are_higher_for_suspects_and_weights_follow_the_shift():
    # S = 0, V = 1 and score = −logit: held-out suspects score higher (t > 0). The model learns any difference,
    # so suspects that look *less* member-like are told apart too (the reference's behaviour): the weights say which
    member_like = run_test(gaussian(80, 4, 4, shift=0.7), gaussian(80, 4, 5), FAST)
    reverse = run_test(gaussian(80, 4, 6, shift=-0.7), gaussian(80, 4, 7), FAST)
    assert member_like.p_value < 1e-3 and min(member_like.t_statistics) > 0
    assert min(member_like.member_weights.values()) > 0 and max(reverse.member_weights.values()) < 0
    assert reverse.p_value < 1e-3 and min(reverse.t_statistics) > 0
    s0, v0 = naive_clip(gaussian(80, 4, 6, shift=-0.7)["f0"].tolist()), naive_clip(gaussian(80, 4, 7)["f0"].tolist())
    assert reverse.shifts["f0"] == pytest.approx((np.mean(s0) - np.mean(v0)) / np.std(s0), rel=1e-9)
    less_likely = dataset_inference(gaussian(80, 4, 6, shift=-0.7).rename(columns={"f0": "loss"}),
                                    gaussian(80, 4, 7).rename(columns={"f0": "loss"}), FAST)
    assert "another kind, not to training" in less_likely.conclusion


def test_p_values_are_uniform_under_the_null():
    # 100 i.i.d. suspect/validation pairs: the rejection count at 0.1 is Binomial(100, 0.1) (99.9% range 2–21)
    settings = DiSettings(n_shuffles=1, epochs=50)  # validity needs no converged fit
    p = np.array([run_test(gaussian(40, 5, 100 + i), gaussian(40, 5, 300 + i), settings).p_value for i in range(100)])
    lo, hi = scipy_stats.binom.ppf(0.0005, 100, 0.1), scipy_stats.binom.isf(0.0005, 100, 0.1)
    assert lo <= (p < 0.1).sum() <= hi
    assert scipy_stats.kstest(p, "uniform").pvalue > 0.001


def test_false_positive_check_does_not_reject_iid_validation_and_a_strong_signal_is_found():
    validation = gaussian(120, 6, 8)
    result = dataset_inference(gaussian(120, 6, 9, shift=0.6), validation, FAST)
    assert result.p_value < 1e-4 and result.test.rejects
    assert not result.check.rejects and result.check.n_suspect == result.check.n_validation == 60
    assert result.check_split == "random halves"
    assert result.conclusion.startswith("Evidence consistent")
    report = json.loads(json.dumps(result.to_dict()))
    assert report["false_positive_check"]["p_value"] == result.check.p_value
    assert report["p_values"] == result.test.p_values and report["seeds"] == [0, 1, 2]


def test_edge_cases_small_sets_constant_features_and_train_size():
    suspect, validation = gaussian(30, 3, 10), gaussian(50, 3, 11)
    suspect["const"], validation["const"] = 1.0, np.linspace(0, 1, 50)
    result = run_test(suspect, validation, FAST)
    assert result.dropped == ["const"] and result.features == ["f0", "f1", "f2"]
    assert (result.n_train, result.n_test_suspect, result.n_test_validation) == (15, 15, 35)
    assert result.clipped == [0, 1]  # 30 < 40: no clipping; int(50·0.025) = 1
    assert n_train_for(5000, 3000) == 1000 and n_train_for(2000, 2001) == 1000 and n_train_for(1999, 4000) == 999
    assert run_test(gaussian(40, 2, 12), gaussian(40, 2, 13), DiSettings(n_shuffles=1, epochs=10, max_train=5)).n_train == 5
    with pytest.raises(ValueError, match="at least 10 texts on each side"):
        run_test(gaussian(9, 2, 14), gaussian(40, 2, 15), FAST)
    with pytest.raises(ValueError, match="at least 20 validation texts"):
        false_positive_check(gaussian(19, 2, 16), FAST)


def test_check_split_keeps_whole_groups_apart_or_falls_back():
    groups = np.array(["a"] * 12 + ["b"] * 12 + ["c"] * 10 + ["d"] * 11)
    first, second, how = split_validation(len(groups), 0, groups)
    assert not set(groups[first]) & set(groups[second]) and how.startswith("whole groups")
    assert sorted(first.tolist() + second.tolist()) == list(range(len(groups)))
    first, second, how = split_validation(25, 0, np.array(["a"] * 20 + ["b"] * 5))  # b alone is too small
    assert how == "random halves" and (len(first), len(second)) == (12, 13)


def test_features_are_the_methods_own_scores(llama_lm):
    texts = random_texts(6, seed=21)
    table = feature_table(llama_lm, texts)
    own = score_texts(llama_lm, texts, ["loss", "zlib", "min_k_pp", "surp", "gap_k", "lowercase"])
    for name in own.columns:
        np.testing.assert_allclose(table[name], own[name], rtol=1e-12)
    stats = llama_lm.token_stats(texts)
    for k in DI_KS:
        np.testing.assert_allclose(table[f"min_k@{k}"], score_texts(llama_lm, texts, ["min_k"], k=k)["min_k"], rtol=1e-12)
        highest = [np.mean(sorted(s.logprob.astype(float).tolist(), reverse=True)[:max(1, int(k * s.n_scored))])
                   for s in stats]
        np.testing.assert_allclose(table[f"max_k@{k}"], highest, rtol=1e-12)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def test_cli_writes_the_result_and_refuses_bad_inputs(model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    suspect, validation = tmp_path / "s.csv", tmp_path / "v.csv"
    s_texts, v_texts = random_texts(24, seed=31), random_texts(24, seed=32)
    pd.DataFrame({"text": s_texts}).to_csv(suspect, index=False)
    pd.DataFrame({"text": v_texts}).to_csv(validation, index=False)
    code, out, err = run_cli("dataset-inference", "--model", model_dir, "--suspect", suspect, "--validation", validation,
                             "--output", tmp_path / "di.json", "--shuffles", "3", "--epochs", "100", "--no-lowercase")
    assert code == 0, err
    report = json.loads((tmp_path / "di.json").read_text())
    assert report["p_value"] == pytest.approx(float(np.median(report["p_values"]))) and len(report["p_values"]) == 3
    assert report["n_train"] == 12 and report["n_test_suspect"] == report["n_test_validation"] == 12
    assert report["false_positive_check"]["n_train"] == 6 and "lowercase" not in report["features"]
    features = feature_table(load_model(str(model_dir)), s_texts + v_texts, lowercase=False)
    again = dataset_inference(features.iloc[:24], features.iloc[24:], DiSettings(n_shuffles=3, epochs=100))
    assert report["p_values"] == pytest.approx(again.test.p_values, rel=1e-9)
    assert "p-value" in out and "false-positive check" in out
    pd.DataFrame({"text": s_texts[:9]}).to_csv(tmp_path / "few.csv", index=False)
    pd.DataFrame({"text": v_texts[:4] + s_texts[:20]}).to_csv(tmp_path / "overlap.csv", index=False)
    for bad, message in (("few.csv", "needs at least 10 per side"), ("overlap.csv", "both suspect and validation")):
        code, _, err = run_cli("dataset-inference", "--model", model_dir, "--suspect", suspect, "--validation",
                               tmp_path / bad, "--output", tmp_path / "x.json")
        assert code == 2 and err.strip().count("\n") == 0 and err.startswith("error:") and message in err, err


def test_book_audit_section_tests_each_book_and_the_whole_set(model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    lm = load_model(str(model_dir))

    def book(name: str, seed: int, label: int | None = None) -> Book:
        return Book(name, " ".join(random_texts(30, seed=seed, min_words=16, max_words=16)), "test", label)

    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_audit(store, ModelRef(str(model_dir)), [book("a", 5), book("b", 6)],
                        [book("m", 1, 1), book("n1", 3, 0), book("n2", 4, 0)],
                        AuditSettings(method="loss", params={}, snippet_words=16), lm=lm)
    run_scoring(store, run_id, ModelRef.of(lm), lm=lm)
    script = (f"from mia_core.runs.store import ResultsStore\nfrom ui.models import cached_model\n"
              f"from ui.dataset_inference import dataset_inference_ui\n"
              f"store = ResultsStore({str(tmp_path / 'r.duckdb')!r})\nrun = store.run({run_id!r})\n"
              f"dataset_inference_ui(store, {run_id!r}, run, cached_model(run['model']))\n")
    at = AppTest.from_string(script, default_timeout=120).run()
    at.number_input(key="di_shuffles").set_value(2)
    at.button(key="di_run").click().run()
    assert not at.exception, at.exception
    assert "60 validation snippets, whole groups on each side (2 groups)" in at.success[0].value
    table = at.dataframe[0].value
    assert table["scope"].tolist() == ["All audited books", "a", "b"] and table["snippets"].tolist() == [60, 30, 30]
    assert table["p_value"].between(0, 1).all()

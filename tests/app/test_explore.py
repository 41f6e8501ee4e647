"""The Explore page through AppTest: scores and redraws without the model, methods that need an extra pass
computed on request (Infilling), GDS once the Benchmark page fitted a classifier."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import mia_core.methods.infilling.engine as engine
from mia_core import METHODS, Score, load_model, score
from mia_core.methods.gds.classifier import fit_classifier
from mia_core.methods.gds.features import GdsSettings, feature_names, features_loop
from mia_core.methods.gds.split import split_record
from mia_core.methods.registry import MethodSpec, NoParams, lowest_k
from mia_core.model.language_model import LanguageModel

from tests.support.app import APP, app

pytestmark = pytest.mark.integration  # the page loads the cached demo model


def test_explore_scores_and_redraws_without_the_model(monkeypatch):
    calls = []
    original = LanguageModel._compute
    monkeypatch.setattr(LanguageModel, "_compute", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    at = app("app_pages/explore.py")
    at.text_area(key="explore_text").input("The <b>cat</b> sat on the mat.\nA second line & more.").run()
    at.button[0].click().run()
    assert not at.exception
    heatmaps = [h.proto.body for h in at.get("html")]
    assert any('id="heatmap-min_k_pp"' in h and "mia-legend" in h for h in heatmaps)
    assert all("<b>" not in h for h in heatmaps) and any("&lt;" in h for h in heatmaps)
    n_calls = len(calls)
    first = [m.value for m in at.metric]
    at.slider(key="explore_k").set_value(0.5).run()
    at.multiselect(key="explore_methods").set_value(["loss", "zlib"]).run()
    assert not at.exception and len(calls) == n_calls  # redrawn from cached statistics
    assert [m.label for m in at.metric] == [METHODS["loss"].label, METHODS["zlib"].label]
    assert first and len(at.get("html")) == 2


def test_explore_computes_extra_pass_methods_on_request_and_redraws_k(monkeypatch):
    calls = []
    original = engine.primed_fast
    monkeypatch.setattr(engine, "primed_fast", lambda *a, **kw: calls.append(1) or original(*a, **kw))

    def probe(stats, params, *, lm):  # a method whose details hold a table (rendered generically)
        rows = [{"text": "<b>neighbour</b>", "logprob": -1.25}]
        return Score(1.5, stats.logprob.astype(float), np.ones(stats.n_scored, bool), {"neighbors": rows, "n": 1})

    monkeypatch.setitem(METHODS, "probe", MethodSpec("probe", probe, NoParams, ("stats", "lm"), "Probe", "a test probe",
                                                     True, ("full logits",), "1 forward pass", None,
                                                     lambda v: f"probe {v}.", "p", "a test probe"))
    text = "The cat sat on the mat. A second line & more."
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("app_pages/explore.py").run()
    at.text_area(key="explore_text").input(text).run()
    at.button[0].click().run()
    at.multiselect(key="explore_extra").set_value(["infilling", "probe"]).run()
    assert not at.exception and not calls  # nothing runs before the button
    assert not [m for m in at.metric if m.label == "Infilling Score"]
    run = at.button(key="explore_extra_run")
    assert "Infilling Score" in run.label and METHODS["infilling"].cost in run.help
    run.click().run()
    assert not at.exception and len(calls) == 1
    lm = load_model("demo")
    expected = score("infilling", lm.token_stats([text])[0], lm=lm, k=0.2)
    n_calls = len(calls)
    metrics_ = {m.label: m.value for m in at.metric}
    assert metrics_["Infilling Score"] == f"{expected.value:.4f}" and metrics_["Probe"] == "1.5000"
    assert any('id="heatmap-infilling"' in h.proto.body for h in at.get("html"))
    assert any("m: 1" in c.value for c in at.caption)  # ≤ 32 tokens: one future token
    assert at.dataframe[0].value["text"].tolist() == ["<b>neighbour</b>"]
    at.slider(key="explore_k").set_value(0.5).run()
    assert not at.exception and len(calls) == n_calls  # redrawn from the stored token scores
    now = lowest_k(expected.token_scores, 0.5).value
    assert {m.label: m.value for m in at.metric}["Infilling Score"] == f"{now:.4f}"


def test_explore_offers_gds_once_benchmark_fitted_one():
    """Explore lists GDS only with a classifier fitted in this session for the current model, and scores with it."""
    lm = load_model("demo")
    rng = np.random.default_rng(0)
    y = np.array([1, 0] * 12)
    features = rng.normal(size=(y.size, len(feature_names(lm.model)))) + y[:, None] * 0.5
    split = split_record(y, np.arange(y.size), np.array([], int), None, train_fraction=1.0, seed=0, source="test")
    classifier = fit_classifier(features, y, lm, settings=GdsSettings(), seed=0, split=split)
    text = "The cat sat on the mat. A second line & more."
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("app_pages/explore.py").run()
    assert not [o for o in at.multiselect(key="explore_extra").options if "GDS" in o]
    assert any("fit it on the Benchmark page" in c.value for c in at.caption)
    at.session_state["gds_classifier"] = {"model": at.session_state["model_spec"], "classifier": classifier}
    at.text_area(key="explore_text").input(text).run()
    at.button[0].click().run()
    assert [o for o in at.multiselect(key="explore_extra").options if "GDS" in o]
    at.multiselect(key="explore_extra").set_value(["gds"]).run()
    at.button(key="explore_extra_run").click().run()
    assert not at.exception
    expected = classifier.log_odds(features_loop(lm, [text], GdsSettings()))[0]  # the one-text loop: independent
    shown = {m.label: float(m.value) for m in at.metric}["GDS (supervised)"]
    assert shown == pytest.approx(expected, abs=1e-3)
    assert any("uses the classifier fitted on the Benchmark page" in c.value for c in at.caption)

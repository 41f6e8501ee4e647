"""Every dashboard page through Streamlit's AppTest: renders, scores, redraws without the model."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from mia_core import METHODS
from mia_core.model.language_model import LanguageModel

APP = str(Path(__file__).resolve().parents[1] / "app.py")
pytestmark = pytest.mark.integration  # the pages load the cached demo model


def app(page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180).run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def test_home_lists_methods_and_sets_and_shows_the_model():
    at = app()
    assert at.title[0].value == "MIA Lens"
    assert sorted(at.table[0].value["method"]) == sorted(METHODS)
    assert sorted(at.table[1].value["name"]) == ["demo-books", "demo-wiki"]
    assert any("never proof" in m.value for m in at.markdown)
    assert any("device **cpu**" in c.value for c in at.sidebar.caption)


def test_bad_model_name_is_a_clear_sidebar_error():
    # AppTest drops sidebar elements on reruns under st.navigation, so the choice is made before the first run
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = "./no/such/model"
    at.run()
    assert not at.exception
    assert any("not found" in e.value for e in at.sidebar.error)


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


def test_learn_page_toy_example():
    at = app("app_pages/learn.py")
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Min-K% token score: log p"]) == pytest.approx(-1.609, abs=1e-3)  # log 0.2
    at.selectbox(key="learn_true").set_value("its").run()
    assert float({m.label: m.value for m in at.metric}["Min-K%++ token score: z"]) < 0

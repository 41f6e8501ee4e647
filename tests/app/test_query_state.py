"""Page state in the URL through AppTest: the model and page settings restored from query parameters (bad values
ignored, a folder from a link loaded only once confirmed), written back as they change, and the kept keys' bounds
equal to their widgets' on the pages."""
from __future__ import annotations

import shutil

import pytest
from streamlit.testing.v1 import AppTest

import mia_core
from ui.places import kept_fields

from tests.support.app import APP

pytestmark = pytest.mark.integration  # the app loads the cached demo model unless told otherwise


def session(model_dir, query: dict, page: str | None = None) -> AppTest:
    """A session opened on a link with `query`, the tiny model chosen in the sidebar, then on `page`."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = str(model_dir)
    at.query_params.update(query)
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def test_page_settings_from_the_link_reach_the_widgets_and_changes_reach_the_url(tiny_model_dir):
    query = {"explore_k": "0.35", "explore_bos": "none", "explore_methods": ["loss", "min_k"]}
    at = session(tiny_model_dir, query, "app_pages/explore.py")
    assert at.slider(key="explore_k").value == pytest.approx(0.35)
    assert at.radio(key="explore_bos").value == "none"
    assert at.multiselect(key="explore_methods").value == ["loss", "min_k"]
    at.slider(key="explore_k").set_value(0.5).run()
    assert at.query_params["explore_k"] == "0.5" and at.query_params["explore_methods"] == ["loss", "min_k"]
    assert at.query_params["model"] == "other" and at.query_params["path"] == str(tiny_model_dir)
    at.switch_page("app_pages/benchmark.py").run()  # another page: its own settings, none of Explore's
    assert "explore_k" not in at.query_params and at.query_params["bench_n"] == "60"


@pytest.mark.parametrize("query", [
    {"explore_k": "7"}, {"explore_k": "nan"}, {"explore_k": "x"}, {"explore_bos": "sometimes"},
    {"explore_methods": ["loss", "zlib", "min_k"]}, {"explore_methods": ["loss", "no_such"]},
    {"explore_methods": ["loss", "loss"]}, {"bench_n": "12.5"}, {"bench_n": "241"}, {"model": "no-such-choice"},
])
def test_bad_values_in_the_link_are_ignored(tiny_model_dir, query):
    at = session(tiny_model_dir, query, "app_pages/explore.py")
    assert at.slider(key="explore_k").value == pytest.approx(0.2)  # the page's defaults
    assert at.radio(key="explore_bos").value == "auto"
    assert at.multiselect(key="explore_methods").value == ["min_k_pp", "min_k"]
    assert at.session_state["model_spec"] == str(tiny_model_dir)


def test_a_folder_from_a_link_is_loaded_only_once_confirmed(tiny_model_dir, tmp_path, monkeypatch):
    folder = str(shutil.copytree(tiny_model_dir, tmp_path / "from-a-link"))  # a new spec: no cache hit
    loaded = []
    real = mia_core.load_model
    monkeypatch.setattr(mia_core, "load_model", lambda spec, **kw: loaded.append(spec) or real(spec, **kw))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"model": "other", "path": folder})
    at.run()
    assert not at.exception, at.exception
    assert at.text_input(key="model_other").value == folder and at.session_state["model_spec"] is None
    assert folder not in loaded and any("came from the link" in i.value for i in at.sidebar.info)
    at.button(key="model_confirm").click().run()
    assert loaded.count(folder) == 1 and at.session_state["model_spec"] == folder
    assert at.query_params["path"] == folder
    at.run()  # the confirmed model stays chosen
    assert at.session_state["model_spec"] == folder and loaded.count(folder) == 1


def test_a_built_in_model_from_the_link_is_chosen_and_the_audit_run_link_kept(tiny_model_dir):
    at = session(tiny_model_dir, {"model": "demo", "run": "no-such-run"}, "app_pages/audit.py")
    assert at.radio(key="model_choice").value == "demo" and at.session_state["model_spec"] == "demo"
    assert at.query_params["run"] == "no-such-run" and at.query_params["model"] == "demo"
    assert "path" not in at.query_params


def widget(at: AppTest, key: str):
    for kind in ("multiselect", "selectbox", "radio", "number_input", "slider"):
        found = [w for w in at.get(kind) if w.key == key]
        if found:
            return kind, found[0]
    raise AssertionError(f"no widget with key {key!r} on the page")


@pytest.mark.parametrize("page", sorted({f.page for f in kept_fields()}))
def test_kept_keys_have_the_options_and_bounds_of_their_widgets(tiny_model_dir, page):
    at = session(tiny_model_dir, {}, f"app_pages/{page}.py")
    for field in (f for f in kept_fields() if f.page == page):
        kind, w = widget(at, field.key)
        if kind in ("number_input", "slider"):
            assert (w.proto.min, w.proto.max) == (field.low, field.high), field.key
            assert field.read([str(w.value)]) == w.value, field.key  # the page's default reads back
        else:
            assert len(w.proto.options) == len(field.options), field.key
            values = w.value if field.many else [w.value]
            assert field.read(list(values)) is not None, field.key
            if set(field.options) <= set(mia_core.METHODS):  # method ids are shown by their labels
                assert list(w.proto.options) == [mia_core.METHODS[m].label for m in field.options], field.key
            if field.most is not None:
                assert w.proto.max_selections == field.most, field.key

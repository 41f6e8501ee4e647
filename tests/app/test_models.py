"""The sidebar model through AppTest: the page is drawn before the model loads, and a failed load ends its status
in error, clears the chosen model and is not retried on every rerun."""
from __future__ import annotations

import shutil

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import mia_core

from tests.support.app import APP

pytestmark = pytest.mark.integration


def test_the_page_is_drawn_before_the_model_loads(tiny_model_dir, tmp_path, monkeypatch):
    folder = str(shutil.copytree(tiny_model_dir, tmp_path / "slow-model"))  # a new spec: a real load, no cache hit
    events = []
    real_load, real_title = mia_core.load_model, st.title
    monkeypatch.setattr(mia_core, "load_model", lambda spec, **kw: events.append("load") or real_load(spec, **kw))
    monkeypatch.setattr(st, "title", lambda *a, **kw: events.append("title") or real_title(*a, **kw))
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = folder
    at.run()
    assert not at.exception, at.exception
    assert events == ["title", "load"]  # Home's title first, then the sidebar's load
    assert at.session_state["model_spec"] == folder
    status = at.sidebar.status[0]
    assert status.label == f"Loaded {folder}" and status.state == "complete"
    assert any("fingerprint" in c.value for c in at.sidebar.caption)


def test_a_failed_load_ends_the_status_in_error_and_clears_the_model(monkeypatch):
    calls = []
    real_load = mia_core.load_model
    monkeypatch.setattr(mia_core, "load_model", lambda spec, **kw: calls.append(spec) or real_load(spec, **kw))
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = "./no/such/model"
    at.run()
    at.switch_page("app_pages/explore.py").run()
    assert not at.exception, at.exception
    status = at.sidebar.status[0]
    assert status.label == "Could not load ./no/such/model" and status.state == "error"
    assert any("not found" in e.value for e in at.sidebar.error)
    assert at.session_state["model_spec"] is None
    assert any("Load a model in the sidebar first" in w.value for w in at.warning)  # the page, without a model
    assert calls == ["./no/such/model"]  # tried once, not on every rerun
    at.button(key="model_retry").click().run()
    assert calls == ["./no/such/model"] * 2 and at.sidebar.status[0].state == "error"


def picker_page():
    """A page that gets the chosen model itself, then does slower work (as Explore's reference p-values do)."""
    import streamlit as st

    from ui.models import cached_model, finish_loading, model_picker

    spec, status = model_picker()
    if spec is not None:
        cached_model(spec)
        st.session_state["loaded_when_page_had_it"] = st.session_state.get("model_loaded")
        st.write("the page's slower work")
    finish_loading(spec, status)


def test_the_status_says_loaded_as_soon_as_the_page_has_the_model(tiny_model_dir, tmp_path):
    folder = str(shutil.copytree(tiny_model_dir, tmp_path / "page-model"))
    at = AppTest.from_function(picker_page, default_timeout=120)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = folder
    at.run()
    assert not at.exception, at.exception
    assert at.session_state["loaded_when_page_had_it"] == folder  # not "Loading …" beside the page's result
    status = at.sidebar.status[0]
    assert status.label == f"Loaded {folder}" and status.state == "complete"
    assert sum("fingerprint" in c.value for c in at.sidebar.caption) == 1  # said once, not again after the page

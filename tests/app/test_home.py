"""The Home page through Streamlit's AppTest: methods, data sets and the model; a bad model name in the sidebar."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from mia_core import METHODS

from tests.support.app import APP, app

pytestmark = pytest.mark.integration  # the pages load the cached demo model


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

"""The Online detection page through AppTest: the demo passages, window scores and their AUROC."""
from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.app import APP

pytestmark = pytest.mark.integration  # the page loads the cached demo model


def test_online_page_demo_draws_windows_and_auroc():
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["model_choice"] = "demo-known"  # membership of the demo paragraphs is known for it
    at.run()
    at.switch_page("app_pages/online.py").run()
    assert not at.exception, at.exception
    at.radio(key="online_source").set_value("demo").run()
    at.number_input(key="online_pairs").set_value(1).run()
    at.button(key="online_run").click().run()
    assert not at.exception, at.exception
    auroc = {m.label: m.value for m in at.metric}["Window AUROC"]
    assert 0.0 <= float(auroc) <= 1.0
    assert len(at.get("plotly_chart")) == 1
    at.number_input(key="online_pick").set_value(2).run()
    assert not at.exception and any("Window 2" in m.value for m in at.markdown)

"""The Unlearning audit page through AppTest: suspects listed and the band drawn."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.support.app import APP

pytestmark = pytest.mark.integration  # the page loads the cached demo model


def test_unlearning_page_lists_suspects_and_draws_the_band():
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.switch_page("app_pages/unlearning.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="unlearn_spec").set_value("demo").run()  # the sidebar's model too: every ratio is 1
    at.text_area(key="unlearn_text").input(" ".join(["The river ran north past the old castle walls."] * 8)).run()
    at.number_input(key="unlearn_words").set_value(24).run()
    at.button(key="unlearn_run").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert len(table) == 3 and np.allclose(table["ratio"], 1.0)  # 72 words in 24-word chunks, all suspects
    assert len(at.get("plotly_chart")) == 1

"""The Learn page through AppTest: the toy example's numbers."""
from __future__ import annotations

import pytest

from tests.support.app import app

pytestmark = pytest.mark.integration  # the app loads the cached demo model


def test_learn_page_toy_example():
    at = app("app_pages/learn.py")
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Min-K% token score: log p"]) == pytest.approx(-1.609, abs=1e-3)  # log 0.2
    at.selectbox(key="learn_true").set_value("its").run()
    assert float({m.label: m.value for m in at.metric}["Min-K%++ token score: z"]) < 0

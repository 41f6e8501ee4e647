"""Explore's comparison with known non-members: the demo's reference set, p-values as defined, other models."""
from __future__ import annotations

import numpy as np
import pytest

from mia_core import score_texts
from mia_core.reference import demo_split, format_p

from ui.models import cached_model
from ui.reference_jobs import reference_jobs

from tests.support.app import app
from tests.support.demo_cache import fresh_cache_with_demo

pytestmark = pytest.mark.integration  # the page loads the cached demo model


def test_demo_text_gets_its_p_value_against_the_demo_reference(tmp_path, monkeypatch):
    """The reference set is not kept yet (a fresh cache): the result shows at once, the p-value's place says how far
    the 120 known non-members are, scored in the background; once kept, the page draws the p-values."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(fresh_cache_with_demo(tmp_path / "cache")))
    at = app("app_pages/explore.py")
    assert at.radio(key="explore_reference_source").value == "The demo's known non-members"
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert at.metric and not any("known non-members (p =" in m.value for m in at.markdown)  # the result, no p yet
    waiting = [i.value for i in at.info if i.value.startswith("**p-value**: scoring the demo's 120 known non-members")]
    assert waiting and " of 120 texts" in waiting[0], [i.value for i in at.info]
    for job in list(reference_jobs().values()):
        job.thread.join(600)
    at.run()
    assert not at.exception, at.exception
    text = at.text_area(key="explore_text").value
    reference_texts = demo_split()[0]["text"].tolist()
    lm = cached_model("demo")  # the page's model: the statistics its background job cached are read, not recomputed
    ref = score_texts(lm, reference_texts, ["min_k_pp"], k=0.2)["min_k_pp"].to_numpy()
    s = score_texts(lm, [text], ["min_k_pp"], k=0.2)["min_k_pp"][0]
    p = (1 + np.sum(ref >= s)) / (1 + ref.size)  # the definition, computed here from the model's own scores
    lines = [m.value for m in at.markdown if m.value.startswith("**Min-K%++**")]
    assert lines and f"of {ref.size} known non-members (p = {format_p(p)})" in lines[0], lines
    assert any("Compared with known non-members**: 120 known" in m.value for m in at.markdown)
    assert len(at.get("plotly_chart")) >= 2  # a histogram per method with the text marked


def test_other_models_have_no_demo_reference(tiny_app):
    at = tiny_app("app_pages/explore.py")
    options = at.radio(key="explore_reference_source").options
    assert "The demo's known non-members" not in options and "Upload known non-members" in options
    at.button[0].click().run()
    assert not at.exception and not any("known non-members (p =" in m.value for m in at.markdown)

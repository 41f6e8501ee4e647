"""The dashboard on a model served by a real vLLM engine: the sidebar says where it is served, Explore offers only what
the server's answers allow (saying why not the rest) and scores as the in-process model does; an API key from the
dashboard's environment is refused unless its operator allows it."""
from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from mia_core import METHODS, load_model
from tests.support.app import APP

pytestmark = [pytest.mark.integration]


def open_explore(spec: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["model_choice"] = "served"
    at.session_state["model_served"] = spec
    at.run()
    at.switch_page("app_pages/explore.py").run()
    assert not at.exception, at.exception
    return at


def test_explore_on_a_served_model(vllm_demo):
    spec = f"{vllm_demo.url}/v1?model=demo"
    at = open_explore(spec)
    assert any("served at" in c.value and "127\\.0\\.0\\.1" in c.value and "11 requests at once" in c.value
               for c in at.sidebar.caption)  # escaped Markdown; the concurrency sized from the engine's KV cache
    offered = at.multiselect(key="explore_methods").options
    assert METHODS["min_k_pp"].label not in offered and METHODS["loss"].label in offered
    box = next(e for e in at.expander if e.label.startswith("Not available for this model"))
    why = " ".join(c.value for c in box.caption)
    assert f"{METHODS['min_k_pp'].label} needs" in why and "logprobs=full" in why
    text = "The harbour of the old town was full of fishing boats."
    at.multiselect(key="explore_methods").set_value(["loss"]).run()
    at.text_area(key="explore_text").input(text).run()
    next(b for b in at.button if b.label == "Score").click().run()
    assert not at.exception, at.exception
    expected = load_model("demo").token_stats([text], cache=False)[0].logprob.astype(np.float64).mean()
    shown = {m.label: m.value for m in at.metric}[METHODS["loss"].label]
    assert abs(float(shown) - expected) <= 1e-3
    bench = AppTest.from_file(APP, default_timeout=300)
    bench.session_state["model_choice"], bench.session_state["model_served"] = "served", spec
    bench.run()
    bench.switch_page("app_pages/benchmark.py").run()
    assert METHODS["min_k_pp"].label not in bench.multiselect(key="bench_methods").options
    bench.switch_page("app_pages/audit.py").run()
    assert METHODS["min_k_pp"].label not in bench.selectbox(key="audit_method").options
    assert not bench.exception, bench.exception


def test_an_api_key_variable_is_refused_unless_the_operator_allows_it(monkeypatch):
    monkeypatch.delenv("MIA_LENS_SERVED_KEYS", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["model_choice"] = "served"
    at.session_state["model_served"] = "http://127.0.0.1:9/v1?model=x&key_env=HOME"
    at.run()
    assert any("MIA_LENS_SERVED_KEYS=1" in e.value for e in at.sidebar.error)
    assert at.session_state["model_spec"] is None  # nothing was sent anywhere

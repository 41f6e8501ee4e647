"""The method pickers offer what the model's access allows: a model that, like a server, returns only the top 20
log-probs per token gets no method that reads the full distribution on Explore, Benchmark or the Book audit, and
each page says which methods it refuses and why; what it allows still scores."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import mia_core
from mia_core import METHODS, load_model
from mia_core.api import ModelAccess

from tests.support.app import APP

pytestmark = pytest.mark.integration

#: What a server returning 20 log-probs per token offers.
SERVED = ModelAccess(top_k=20, where="this server")
#: Its refusal of Min-K%++, in the words a person reads (written here, not taken from the registry).
WHY_NOT_MIN_K_PP = "this server returns 20 log-probs per token"


class ServedModel:
    """A tiny in-process model that declares the access of a server: everything else is the model's own."""

    access = SERVED

    def __init__(self, lm) -> None:
        self._lm = lm

    def __getattr__(self, name: str):
        return getattr(self._lm, name)


@pytest.fixture
def served(tiny_model_dir, tmp_path, monkeypatch) -> str:
    """A model folder that loads as a `ServedModel` (a folder of its own: no cached model under its name)."""
    folder = str(shutil.copytree(tiny_model_dir, tmp_path / "served-model"))
    real = mia_core.load_model
    monkeypatch.setattr(mia_core, "load_model",
                        lambda spec, **kw: ServedModel(real(spec, **kw)) if spec == folder else real(spec, **kw))
    return folder


def open_page(folder: str, page: str, query: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = folder
    at.query_params.update(query or {})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def refusals(at: AppTest) -> tuple[str, str]:
    """The "Not available for this model" expander's title and the sentences in it."""
    box = next(e for e in at.expander if e.label.startswith("Not available for this model"))
    return box.label, " ".join(c.value for c in box.caption)


def test_explore_offers_what_a_served_model_allows_and_says_why_not_the_rest(served):
    at = open_page(served, "app_pages/explore.py", {"explore_methods": ["min_k_pp", "loss"]})  # a link asks for both
    offered = at.multiselect(key="explore_methods").options
    assert METHODS["min_k_pp"].label not in offered and METHODS["min_k"].label in offered
    assert METHODS["loss"].label in offered
    assert at.multiselect(key="explore_methods").value == ["loss"]  # the refused one dropped from the link's choice
    title, why = refusals(at)
    assert METHODS["min_k_pp"].label in title
    assert f"{METHODS['min_k_pp'].label} needs" in why and WHY_NOT_MIN_K_PP in why
    text = "The cat sat on the mat."
    at.multiselect(key="explore_methods").set_value(["min_k"]).run()
    at.slider(key="explore_k").set_value(0.5).run()
    at.text_area(key="explore_text").input(text).run()
    next(b for b in at.button if b.label == "Score").click().run()
    assert not at.exception, at.exception
    logprob = np.sort(load_model(served).token_stats([text])[0].logprob.astype(np.float64))
    expected = logprob[:max(1, int(len(logprob) * 0.5))].mean()  # the lowest half of the log-probs, by hand
    assert {m.label: m.value for m in at.metric}[METHODS["min_k"].label] == f"{expected:.4f}"


def test_benchmark_and_the_book_audit_offer_what_a_served_model_allows(served):
    bench = open_page(served, "app_pages/benchmark.py")
    offered = set(bench.multiselect(key="bench_methods").options)
    assert METHODS["min_k_pp"].label not in offered and {METHODS[m].label for m in ("loss", "zlib", "min_k")} <= offered
    assert bench.multiselect(key="bench_methods").value == ["loss", "zlib", "min_k"]  # Min-K%++ left out
    assert WHY_NOT_MIN_K_PP in refusals(bench)[1]
    audit = open_page(served, "app_pages/audit.py")
    options = audit.selectbox(key="audit_method").options
    assert METHODS["min_k_pp"].label not in options and METHODS["min_k"].label in options
    assert audit.selectbox(key="audit_method").value != "min_k_pp"
    title, why = refusals(audit)
    assert METHODS["min_k_pp"].label in title and WHY_NOT_MIN_K_PP in why


def test_an_in_process_model_is_refused_nothing(tiny_app):
    at = tiny_app("app_pages/explore.py")
    assert not [e for e in at.expander if e.label.startswith("Not available")]
    assert set(at.multiselect(key="explore_methods").options) == {s.label for s in METHODS.values() if s.stats_only}

"""Explore keeps the previous model's result beside the new one for the same text (`ui.explore_compare`), through
AppTest: two columns, each under its model's stamp, each number equal to the score computed directly with that model;
another text drops the comparison, and so does the clear button."""
from __future__ import annotations

import hashlib
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from mia_core import METHODS, load_model, score
from ui.explore_compare import PREVIOUS, Scored, next_previous
from ui.models import cached_stats, shared_model
from ui.markdown import md
from ui.work_estimate import count_tokens

pytestmark = pytest.mark.integration  # the app loads models

TEXT = "The cat sat on the mat."


def press_score(at: AppTest) -> None:
    next(b for b in at.button if b.label == "Score").click().run()
    assert not at.exception, at.exception


def compared_metrics(at: AppTest) -> dict[str, str]:
    """The comparison's metrics: label (method · model) → value."""
    return {m.label: m.value for m in at.metric if " · " in m.label}


def direct(spec: str, method: str, **params) -> str:
    """The method's score of TEXT computed directly with that model, as the page writes it."""
    return f"{score(method, load_model(spec).token_stats([TEXT])[0], **params).value:.4f}"


def test_next_previous_keeps_the_old_request_only_for_the_same_text_and_another_model():
    a, b = Scored("a", "fa", "x", "auto"), Scored("b", "fb", "x", "auto")
    assert next_previous(None, a, b) == a  # the model changed: compare
    assert next_previous(a, b, Scored("b", "fb", "y", "auto")) is None  # another text: dropped
    assert next_previous(a, b, Scored("b", "fb", "x", "none")) is None  # another BOS policy: dropped
    assert next_previous(a, b, b) == a  # the same model again: the kept one stays
    assert next_previous(b, a, Scored("b", "fb", "x", "auto")) == a  # back to b: compared with a, not itself
    assert next_previous(None, None, a) is None


def test_explore_shows_the_previous_model_beside_the_new_one_for_the_same_text(tiny_app, tiny_model_dir,
                                                                               second_model_dir):
    first, second = str(tiny_model_dir), str(second_model_dir)
    at = tiny_app("app_pages/explore.py")
    at.text_area(key="explore_text").input(TEXT).run()
    press_score(at)
    assert not compared_metrics(at) and PREVIOUS not in at.session_state  # one model so far: one panel
    at.text_input(key="model_other").input(second).run()
    press_score(at)
    shown = compared_metrics(at)
    methods = at.multiselect(key="explore_methods").value
    assert methods == ["min_k_pp", "min_k"]
    expected = {f"{METHODS[m].label} · {md(spec)}": direct(spec, m, k=0.2) for spec in (first, second) for m in methods}
    assert shown == expected and len(set(shown.values())) == 4  # each number is its own model's
    heatmaps = " ".join(h.proto.body for h in at.get("html"))
    assert all(f'id="compare-{which}-{m}"' in heatmaps for which in ("previous", "current") for m in methods)
    titles = [m.value for m in at.markdown if m.value.startswith("#### ")]
    assert titles == [f"#### Previous model: {md(first)}", f"#### This model: {md(second)}"]
    fingerprints = {spec: load_model(spec).fingerprint[:12] for spec in (first, second)}
    short = hashlib.sha256(TEXT.encode()).hexdigest()[:8]
    stamps = [c.value for c in at.caption if c.value.startswith("model **")]
    assert len(stamps) == 2 and all(short in s and "k 0.2" in s for s in stamps)
    assert fingerprints[first] in stamps[0] and fingerprints[second] in stamps[1]  # previous left, current right
    again = [e for e in at.expander if e.label.startswith("This model's scores again")]
    assert len(again) == 1 and not again[0].proto.expanded  # not drawn a second time in view: collapsed below
    at.button(key="explore_compare_clear").click().run()
    assert not at.exception and not compared_metrics(at)
    at.text_input(key="model_other").input(first).run()
    press_score(at)
    assert len(compared_metrics(at)) == 4  # back to the first model: the second one beside it
    at.text_area(key="explore_text").input("A different text now.").run()
    press_score(at)
    assert not compared_metrics(at) and PREVIOUS not in at.session_state  # a different text drops the comparison
    assert {m.label for m in at.metric} == {METHODS[m].label for m in methods}


def test_explore_drops_the_comparison_when_the_previous_model_no_longer_loads(tiny_app, tiny_model_dir,
                                                                              second_model_dir, tmp_path):
    gone = tmp_path / "gone-model"
    shutil.copytree(tiny_model_dir, gone)
    at = tiny_app("app_pages/explore.py")
    at.text_input(key="model_other").input(str(gone)).run()
    at.text_area(key="explore_text").input(TEXT).run()
    press_score(at)
    at.text_input(key="model_other").input(str(second_model_dir)).run()
    press_score(at)
    assert len(compared_metrics(at)) == 4
    shutil.rmtree(gone)
    shared_model.clear()  # as if the server had let the model go: the folder is read again, and is gone
    cached_stats.clear()
    count_tokens.clear()
    at.slider(key="explore_k").set_value(0.5).run()
    assert not at.exception, at.exception
    assert "no longer loads, so it is not compared" in " ".join(w.value for w in at.warning)
    assert not compared_metrics(at) and PREVIOUS not in at.session_state
    assert {m.label for m in at.metric} == {METHODS["min_k_pp"].label, METHODS["min_k"].label}  # this model's stay

"""A method registered in a test shows up everywhere without another file touched: scored on Explore with its own
parameter widget and legend words, its AUROC row on Benchmark, its formula and idea on Learn, and in `mia methods`.
The method is removed from the registry afterwards."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from mia_core import METHODS, load_model

from tests.support.app import app
from tests.support.cli_runner import run_cli

pytestmark = pytest.mark.integration

NAME, LABEL = "tmp_test_method", "Tmp test method"
MODULE = '''
from dataclasses import dataclass

import numpy as np

from mia_core.api import AccessNeeds, Paper, Score, TokenView, param, register, require_tokens


@dataclass(frozen=True)
class TmpParams:
    shift: float = param(0.0, "added to every token's log-prob", low=-1.0, high=1.0, step=0.25)


@register("tmp_test_method", label="Tmp test method", summary="the mean log-prob plus a shift (a test method)",
          reading=lambda v: f"tmp value {v:.3f}.", formula=r"\\mathrm{tmp}(x) = \\tfrac{1}{n}\\textstyle\\sum_t \\log p + s",
          idea="A throwaway method that a test registers.", access=AccessNeeds(), params=TmpParams,
          view=TokenView(colour="tmpcolour words", outlined="tmpoutlined words", low="tmplow words",
                         high="tmphigh words"),
          paper=Paper("Nobody et al.", 2026, title="A throwaway method"), fails="When a test forgets it.", lesson=690)
def tmp_test_method(stats, params):
    require_tokens(stats)
    token_scores = stats.logprob.astype(np.float64) + params.shift
    return Score(float(token_scores.mean()), token_scores, np.ones(stats.n_scored, bool))
'''


@pytest.fixture
def registered(tmp_path):
    """The method, registered by importing a module written here; gone from the registry afterwards."""
    path = tmp_path / "tmp_method_module.py"
    path.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("tmp_method_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        assert METHODS[NAME].label == LABEL
        yield METHODS[NAME]
    finally:
        METHODS.pop(NAME, None)
        sys.modules.pop(spec.name, None)


def test_explore_scores_it_with_its_parameter_and_legend(registered, tiny_app, tiny_model_dir):
    text = "The cat sat on the mat. A second line & more."
    at = tiny_app("app_pages/explore.py")
    assert LABEL in at.multiselect(key="explore_methods").options
    at.multiselect(key="explore_methods").set_value([NAME]).run()
    shift = at.slider(key="explore_shift")  # drawn from its parameters dataclass: bounds, step, help
    assert (shift.min, shift.max, shift.step, shift.value) == (-1.0, 1.0, 0.25, 0.0) and LABEL in shift.label
    shift.set_value(0.5).run()
    at.text_area(key="explore_text").input(text).run()
    next(b for b in at.button if b.label == "Score").click().run()
    assert not at.exception, at.exception
    logprob = load_model(str(tiny_model_dir)).token_stats([text])[0].logprob.astype(np.float64)
    assert {m.label: m.value for m in at.metric}[LABEL] == f"{logprob.mean() + 0.5:.4f}"
    heatmap = next(h.proto.body for h in at.get("html") if f'id="heatmap-{NAME}"' in h.proto.body)
    assert all(words in heatmap for words in ("tmpcolour words", "tmpoutlined words", "tmplow words", "tmphigh words"))


def test_benchmark_evaluates_it(registered, tiny_app):
    """Its scores are the mean log-probs, as loss's: the same AUROC on the same texts."""
    at = tiny_app("app_pages/benchmark.py")
    at.number_input(key="bench_n").set_value(6).run()
    at.multiselect(key="bench_methods").set_value(["loss", NAME]).run()
    at.button(key="bench_run").click().run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value.set_index("method")
    assert table.loc[LABEL, "AUROC"] == pytest.approx(table.loc[METHODS["loss"].label, "AUROC"], abs=1e-12)
    assert f"--methods loss,{NAME}" in at.code[0].value


def test_learn_and_the_cli_list_it(registered):
    at = app("app_pages/learn.py")
    assert at.expander[-1].label == f"{len(METHODS)}. {LABEL}  ·  `{NAME}`"  # lesson 690: taught last
    toy = {m.label: float(m.value) for m in at.metric}[f"{LABEL} on the toy"]  # a token-level statistics method
    assert toy == pytest.approx((-2.1 - 6.5 - 0.4 - 1.2 - 0.3 - 7.8 - 0.9 - 5.2) / 8, abs=1e-4)  # shift 0
    assert registered.formula.strip() in [x.value.strip("$\n") for x in at.latex]
    assert any("A throwaway method that a test registers." in m.value for m in at.markdown)
    code, out, err = run_cli("methods")
    assert code == 0, err
    assert NAME in out and LABEL in out and "--param shift=0.0" in out and "added to every token" in out

"""The registry declares everything about a method: a half-registered method fails here, in CI."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from mia_core import METHODS, Score, get_method
from mia_core.methods import methods_for, reading, stats_only_methods
from mia_core.api import AccessNeeds, KParams, Paper, TokenView, lowest_k, register

TESTS = Path(__file__).resolve().parents[1]
#: Methods whose orientation ("higher = member") is checked by a test of their own, not by the shared one.
ORIENTATION_ELSEWHERE = {"gds": "test_members_score_higher_on_the_held_out_part",
                         "probe": "test_members_score_higher_on_the_held_out_part",
                         "em_mia": "test_members_score_higher_when_members_were_trained_packed",
                         "simmia": "test_simmia_scores_members_higher",
                         "simmia_star": "test_simmia_star_scores_members_higher"}


def shared_orientation_cases() -> set[str]:
    """The methods `test_every_method_scores_members_higher` runs on (its parametrisation, evaluated)."""
    from tests.methods.test_methods import test_every_method_scores_members_higher as test  # noqa: PLC0415  (a test module)

    mark = next(m for m in test.pytestmark if m.name == "parametrize")
    return set(mark.args[1])


def test_tests_directory_is_importable():
    assert any(TESTS.rglob("test_methods.py"))


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_is_registered_whole(name):
    spec = METHODS[name]
    sentence = spec.reading(-1.25)
    assert isinstance(sentence, str) and sentence.strip() and any(c.isdigit() for c in sentence), sentence
    assert reading(name, 0.5).endswith("compare it with texts of known membership.")
    assert spec.formula.strip() and "\\" in spec.formula or "=" in spec.formula  # LaTeX, shown on Learn
    assert len(spec.idea.split()) >= 5
    assert spec.centre is None or math.isfinite(spec.centre)  # in its view, declared explicitly (no default view)
    assert spec.label and spec.summary and spec.cost and spec.access


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_has_an_orientation_test(name):
    """Orientation (higher = member) is tested for every method: by the shared test or a named one."""
    if name in ORIENTATION_ELSEWHERE:
        found = [p for p in TESTS.rglob("test_*.py")
                 if any(isinstance(node, ast.FunctionDef) and node.name == ORIENTATION_ELSEWHERE[name]
                        for node in ast.walk(ast.parse(p.read_text())))]
        assert found, f"{name}: no test named {ORIENTATION_ELSEWHERE[name]}"
    else:
        assert name in shared_orientation_cases(), f"{name} is missing from the shared orientation test"


def test_register_refuses_a_half_declared_method():
    with pytest.raises(TypeError, match="reading"):
        register("half", label="Half", summary="no reading, formula or idea", access=AccessNeeds(), view=TokenView())
    with pytest.raises(TypeError, match="view"):
        register("half", label="Half", summary="no view", access=AccessNeeds(), reading=lambda v: f"{v}",
                 formula="x = 1", idea="an idea of five words")
    with pytest.raises(ValueError, match="formula"):
        register("half", label="Half", summary="s", access=AccessNeeds(), view=TokenView(), reading=lambda v: f"{v}",
                 formula=" ", idea="an idea")
    whole = {"label": "Half", "summary": "s", "access": AccessNeeds(), "view": TokenView(), "reading": lambda v: f"{v}",
             "formula": "x = 1", "idea": "an idea"}
    with pytest.raises(ValueError, match="its paper"):
        register("half", **whole, fails="never", lesson=110)
    with pytest.raises(ValueError, match="when it fails"):
        register("half", **whole, paper=Paper("A & B", 2024), fails=" ", lesson=110)
    with pytest.raises(ValueError, match="lesson"):
        register("half", **whole, paper=Paper("A & B", 2024), fails="never", lesson=5)
    assert "half" not in METHODS


def test_readings_name_the_number():
    assert "probability 88%" in reading("gds", 2.0) and "0.50 nats per token less" in reading("neighbor", -0.5)


def test_methods_for_filters_by_what_is_available():
    stats_only = {n for n, spec in METHODS.items() if spec.needs == ("stats",)}
    assert {"loss", "zlib", "min_k", "min_k_pp", "surp", "gap_k", "tag_tab"} <= stats_only
    assert set(methods_for(("stats",))) == set(stats_only_methods()) == stats_only
    assert set(methods_for(("stats", "lowercase_stats"))) == stats_only | {"lowercase"}
    with_lm = set(methods_for(("stats", "lm")))
    assert {"infilling", "pac"} <= with_lm and not with_lm & {"gds", "recall", "camia", "lowercase"}
    assert "recall" in methods_for(("stats", "lm", "shots_nonmembers")) and "con_recall" not in methods_for(
        ("stats", "lm", "shots_nonmembers"))
    assert "camia" in methods_for(("stats", "reference"))
    assert set(methods_for()) == set(METHODS)
    assert "neighbor" in methods_for(("stats", "lm"), token_level=False)
    assert "min_k" not in methods_for(token_level=False)


def test_unknown_names_suggest_the_closest():
    with pytest.raises(KeyError, match="did you mean 'min_k_pp'"):
        get_method("min_kpp")
    with pytest.raises(KeyError, match="did you mean 'recall'"):
        get_method("recal")
    with pytest.raises(KeyError, match=f"available: {', '.join(sorted(METHODS))}"):
        get_method("nothing-like-it")


@pytest.mark.parametrize("name", [n for n in sorted(METHODS) if "k" in METHODS[n].param_names])
@pytest.mark.parametrize("k", [0, -0.1, 1.5, float("nan"), True])
def test_k_is_validated_once_by_the_parameters(name, k):
    with pytest.raises(ValueError, match="k must be in"):
        get_method(name).make_params(k=k)


def test_parameters_validate_themselves():
    with pytest.raises(ValueError, match="a must be > 0"):
        get_method("dc_pdd").make_params(a=0)
    with pytest.raises(ValueError, match="m must be a positive integer"):
        get_method("infilling").make_params(m=0)
    with pytest.raises(ValueError, match="normalization"):
        get_method("infilling").make_params(normalization="sideways")
    with pytest.raises(ValueError, match="n_neighbors"):
        get_method("neighbor").make_params(n_neighbors=0)
    assert KParams().k == 0.2
    # numpy numbers (e.g. from a table of settings) are numbers too
    assert get_method("dc_pdd").make_params(a=np.float32(0.01)).a == np.float32(0.01)
    assert get_method("min_k").make_params(k=np.float64(0.3)).k == 0.3 and KParams(1).k == 1


def test_score_at_k_equals_a_fresh_selection():
    rng = np.random.default_rng(0)
    token_scores = rng.normal(size=57)
    first = lowest_k(token_scores, 0.2)
    for k in (0.05, 0.29, 0.5, 1.0):
        again, naive = first.at_k(k), np.sort(token_scores)[:max(1, int(57 * k))]
        assert again.value == pytest.approx(naive.mean(), rel=1e-12) and again.selected.sum() == naive.size
        assert again.k == k and again.at_k(0.2).value == pytest.approx(first.value, rel=1e-12)
    assert first.at_k(0.2) is first
    assert Score(1.0, token_scores, np.ones(57, bool)).at_k(0.5) is None  # not a min-k% mean: cannot redraw


DOCS = TESTS.parent / "docs" / "methods.md"
#: Test files that check the registry and the contract as a whole, not a method's numbers.
WHOLE = {"test_registry.py"}


def names_tested_by_file() -> dict[str, set[str]]:
    """Method names written as string literals inside `test_*` functions, by test file (tests/methods/)."""
    out = {}
    for path in sorted((TESTS / "methods").glob("test_*.py")):
        if path.name in WHOLE:
            continue
        tree = ast.parse(path.read_text())
        out[path.name] = {n.value for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
                          for n in ast.walk(f) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        params = {n.value for d in ast.walk(tree) if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "parametrize"
                  for n in ast.walk(d) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        out[path.name] |= params
    return out


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_has_its_docs_section_and_a_test(name):
    """A method is one file plus its test and its docs section: a registration without them fails CI."""
    sections = {line[3:].strip() for line in DOCS.read_text().splitlines() if line.startswith("## ")}
    assert name in sections, f"docs/methods.md has no '## {name}' section"
    files = [f for f, names in names_tested_by_file().items() if name in names]
    assert files, f"no test in tests/methods/ names {name!r} (add tests/methods/test_{name}.py against an oracle)"

"""The Learn page through AppTest: every registered method's formula, and the toy examples' numbers."""
from __future__ import annotations

import pytest

from mia_core import METHODS
from tests.support.app import app

pytestmark = pytest.mark.integration  # the app loads the cached demo model


def test_learn_page_toy_example():
    at = app("app_pages/learn.py")
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Min-K% token score: log p"]) == pytest.approx(-1.609, abs=1e-3)  # log 0.2
    at.selectbox(key="learn_true").set_value("its").run()
    assert float({m.label: m.value for m in at.metric}["Min-K%++ token score: z"]) < 0


def test_learn_lists_every_registered_method_with_its_formula_and_idea():
    at = app("app_pages/learn.py")
    assert [e.label for e in at.expander] == [f"{s.label}  ·  `{s.name}`" for s in METHODS.values()]
    formulas = [x.value.strip("$\n") for x in at.latex]  # st.latex wraps the formula in $$ … $$
    assert formulas == [s.formula.strip() for s in METHODS.values()]
    written = " ".join(m.value for m in at.markdown)
    assert all(s.idea in written for s in METHODS.values())
    needs = [m.value for m in at.markdown if m.value.startswith("**Needs:**")]
    assert len(needs) == len(METHODS)
    for line, spec in zip(needs, METHODS.values()):  # one clause per need, in words (no parameter names)
        assert line.count(";") == len(spec.needs) - 1 and "`" not in line
    assert "further passes of the target model itself" in needs[list(METHODS).index("infilling")]
    assert "a reference model" in needs[list(METHODS).index("ref")]
    costs = " ".join(c.value for c in at.caption)
    assert all(s.cost in costs for s in METHODS.values())


def test_learn_page_surp_and_gap_k_on_made_up_tokens():
    """The toy rows by hand: int(0.4·8) = 3 least likely tokens (1287 −7.8, castle −6.5, monks −5.2), of which only
    1287 was predicted with entropy < 2 nats; the worst of the six 3-token windows of gaps is (1287, by, monks)."""
    at = app("app_pages/learn.py")
    metrics = {m.label: float(m.value) for m in at.metric}
    assert metrics["SURP score: mean log p of the surprising tokens"] == pytest.approx(-7.8, abs=1e-3)
    worst = ((-7.8 + 0.9) / 1.9 + (-0.9 + 0.5) / 0.9 + (-5.2 + 1.5) / 1.8) / 3
    assert metrics["Gap-K% score: mean gap of the worst window"] == pytest.approx(worst, abs=1e-3)
    table = at.dataframe[-1].value
    assert table["surprising (SURP)"].tolist() == [False] * 5 + [True, False, False]
    assert table["in a chosen window"].tolist() == [False] * 5 + [True] * 3
    assert table["gap g (Gap-K%)"].tolist()[2] == 0.0  # " was" was the top guess

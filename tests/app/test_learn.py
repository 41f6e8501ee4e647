"""The Learn page through AppTest: the methods in the teaching order docs/methods.md documents, each with its formula,
idea, paper and when it fails; a live toy for every token-level method that reads only the statistics, whose numbers
are checked by hand and against the method on the toy's input; the mode toy."""
from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from mia_core import METHODS, score
from mia_core.api import methods_for
from tests.support.app import app
from ui.learn_toys import CORPUS_COUNTS, TOY, toy_inputs, toy_methods, toy_stats, toy_table

pytestmark = pytest.mark.integration  # the app loads the cached demo model

DOCS = Path(__file__).resolve().parents[2] / "docs" / "methods.md"


def documented_order() -> list[str]:
    """The order written in docs/methods.md, "Teaching order" (the line of names joined by arrows)."""
    section = DOCS.read_text().split("## Teaching order", 1)[1].split("\n## ", 1)[0]
    line = " ".join(section.split("Order:", 1)[1].split("\n\n", 1)[0].split())
    return re.findall(r"`(\w+)`", line)


def toy_tables(at) -> dict:
    """Each toy's result table (token, token score, enters the score), by method, in the page's order."""
    results = [d.value for d in at.dataframe if "enters the score" in d.value.columns]
    return dict(zip(toy_methods(), results, strict=True))


def test_learn_lists_the_methods_in_the_documented_teaching_order():
    order = documented_order()
    assert order[:4] == ["loss", "zlib", "min_k", "min_k_pp"] and sorted(order) == sorted(METHODS)
    at = app("app_pages/learn.py")
    assert [e.label for e in at.expander] == [f"{n + 1}. {METHODS[m].label}  ·  `{m}`" for n, m in enumerate(order)]
    formulas = [x.value.strip("$\n") for x in at.latex]  # st.latex wraps the formula in $$ … $$
    assert formulas == [METHODS[m].formula.strip() for m in order]


def test_learn_gives_every_method_its_paper_and_when_it_fails():
    at = app("app_pages/learn.py")
    papers = [m.value for m in at.markdown if m.value.startswith("**Paper:**")]
    fails = [m.value for m in at.markdown if m.value.startswith("**When it fails:**")]
    assert len(papers) == len(fails) == len(METHODS)
    order = documented_order()
    for name, paper, fail in zip(order, papers, fails):
        spec = METHODS[name]
        assert spec.paper.authors.split(",")[0].split(" ")[0] in paper and len(spec.fails.split(". ")) <= 3
        assert (f"[{spec.paper.link}]({spec.paper.link})" in paper) if spec.paper.link else "http" not in paper
        assert "no link" not in paper and ".." not in paper.replace("\\", "")
        assert spec.paper.year is None or f"{spec.paper.year}" in paper
        assert fail.removeprefix("**When it fails:** ").replace("\\", "") == spec.fails
    links = [METHODS[m].paper.link for m in order]
    assert links[order.index("min_k")] == "https://arxiv.org/abs/2310.16789"  # METHODS-FIELD.md / the papers' ids
    assert links[order.index("min_k_pp")] == "https://arxiv.org/abs/2404.02936"
    assert links[order.index("gap_k")] == "https://arxiv.org/abs/2601.19936"
    written = " ".join(m.value for m in at.markdown)
    assert all(METHODS[m].idea in written for m in order)
    needs = [m.value for m in at.markdown if m.value.startswith("**Needs:**")]
    for line, name in zip(needs, order):  # one clause per need, in words (no parameter names)
        assert line.count(";") == len(METHODS[name].needs) - 1 and "`" not in line
    costs = " ".join(c.value for c in at.caption)
    assert all(s.cost in costs for s in METHODS.values())


def test_every_token_level_method_a_table_can_run_has_a_toy_that_matches_its_implementation():
    """The toy's number is the method run on the toy's input, and by hand for the simplest ones: n = 8 tokens,
    k = 0.2 → int(1.6) = 1 token (1287, log p −7.8); zlib over the toy's text; DC-PDD over the made-up corpus counts."""
    toys = toy_methods()
    assert set(toys) == set(methods_for(("stats", "freq"), token_level=True)) and len(toys) == 8
    at = app("app_pages/learn.py")
    shown = {m.label: float(m.value) for m in at.metric}
    stats = toy_stats(TOY)
    for name in toys:
        table = toy_table(name)
        expected = score(name, stats, **toy_inputs(name, table)).value
        assert shown[f"{METHODS[name].label} on the toy"] == pytest.approx(expected, abs=1e-4)
    logp = np.array(TOY["log p"])
    text = "".join(TOY["token"])
    assert shown[f"{METHODS['loss'].label} on the toy"] == pytest.approx(logp.mean(), abs=1e-4)
    assert shown[f"{METHODS['zlib'].label} on the toy"] == pytest.approx(
        logp.mean() / len(zlib.compress(text.encode())), abs=1e-4)
    assert shown[f"{METHODS['min_k'].label} on the toy"] == pytest.approx(-7.8, abs=1e-4)
    z = (logp + np.array(TOY["entropy (nats)"])) / np.array(TOY["σ"])  # μ = −entropy
    assert shown[f"{METHODS['min_k_pp'].label} on the toy"] == pytest.approx(z.min(), abs=1e-4)
    counts = np.array(CORPUS_COUNTS["corpus count"], dtype=float)  # DC-PDD by hand: Laplace f, α capped at 0.01
    alpha = np.minimum(-np.exp(logp) * np.log((counts + 1) / (counts.sum() + 8)), 0.01)
    assert shown[f"{METHODS['dc_pdd'].label} on the toy"] == pytest.approx(alpha.mean(), abs=1e-4)
    tables = toy_tables(at)
    assert list(tables) == toys
    assert tables["min_k"]["enters the score"].tolist() == [False] * 5 + [True, False, False]


def test_learn_page_surp_and_gap_k_on_made_up_tokens():
    """The toy rows by hand: int(0.4·8) = 3 least likely tokens (1287 −7.8, castle −6.5, monks −5.2), of which only
    1287 was predicted with entropy < 2 nats; the worst of the six 3-token windows of gaps is (1287, by, monks)."""
    at = app("app_pages/learn.py")
    metrics = {m.label: float(m.value) for m in at.metric}
    assert metrics[f"{METHODS['surp'].label} on the toy"] == pytest.approx(-7.8, abs=1e-4)
    worst = ((-7.8 + 0.9) / 1.9 + (-0.9 + 0.5) / 0.9 + (-5.2 + 1.5) / 1.8) / 3
    assert metrics[f"{METHODS['gap_k'].label} on the toy"] == pytest.approx(worst, abs=1e-4)
    tables = toy_tables(at)
    assert tables["surp"]["enters the score"].tolist() == [False] * 5 + [True, False, False]
    assert tables["gap_k"]["enters the score"].tolist() == [False] * 5 + [True] * 3
    assert tables["gap_k"]["token score"].tolist()[2] == 0.0  # " was" was the top guess


def test_learn_page_mode_toy():
    at = app("app_pages/learn.py")
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Min-K% token score: log p"]) == pytest.approx(-1.609, abs=1e-3)  # log 0.2
    p = np.array([0.2, 0.2, 0.15, 0.1, 0.1, 0.08, 0.07, 0.05, 0.03, 0.02])
    mu = float(np.sum(p * np.log(p)))
    sigma = float(np.sqrt(np.sum(p * (np.log(p) - mu) ** 2)))
    assert float(metrics["Min-K%++ token score: z"]) == pytest.approx((np.log(0.2) - mu) / sigma, abs=1e-3)
    at.selectbox(key="learn_true").set_value("its").run()
    assert float({m.label: m.value for m in at.metric}["Min-K%++ token score: z"]) == pytest.approx(
        (np.log(0.02) - mu) / sigma, abs=1e-3)

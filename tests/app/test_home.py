"""The Home page through AppTest: a start-here path per user linking to pages with the demo chosen, the methods
table grouped by need with where each runs (checked against what the pages offer), data sets and the model."""
from __future__ import annotations

from urllib.parse import parse_qs

import pytest

from mia_core import METHODS

from tests.support.app import app

pytestmark = pytest.mark.integration  # the pages load the cached demo model


def test_home_lists_methods_and_sets_and_shows_the_model():
    at = app()
    assert at.title[0].value == "MIA Lens"
    table = at.dataframe[0].value
    assert sorted(table["id"]) == sorted(METHODS) and set(table["method"]) == {s.label for s in METHODS.values()}
    assert sorted(at.table[0].value["name"]) == ["demo-books", "demo-wiki"]
    assert any("never proof" in m.value for m in at.markdown)
    assert any("device **cpu**" in c.value for c in at.sidebar.caption)


def test_start_here_has_three_steps_per_user_linking_to_pages_with_the_demo():
    at = app()
    assert [m.value for m in at.markdown if m.value in ("**Auditor**", "**Researcher**", "**Teacher**")] == \
        ["**Auditor**", "**Researcher**", "**Teacher**"]
    links = at.get("page_link")
    assert len(links) == 9
    pages = {"audit", "unlearning", "online", "benchmark", "explore", "learn"}
    assert {link.proto.page for link in links} == pages  # every page but Home is a step somewhere
    for link in links:
        query = parse_qs(link.proto.query_string)
        if link.proto.page != "learn":  # a page that runs a model opens with a demo model chosen
            assert query["model"][0] in ("demo", "demo-known"), link.proto.label
    audit = next(link for link in links if link.proto.page == "audit")
    assert parse_qs(audit.proto.query_string) == {"model": ["demo-known"]}
    explore = next(link for link in links if link.proto.page == "explore")
    assert parse_qs(explore.proto.query_string)["explore_methods"] == ["min_k_pp", "min_k"]


def test_methods_table_groups_by_need_and_agrees_with_the_pages(tiny_app):
    table = app().dataframe[0].value.set_index("id")
    by_hand = {"loss": "statistics only", "min_k_pp": "statistics only", "lowercase": "extra passes of the target",
               "neighbor": "extra passes of the target", "recall": "helper texts (known members or non-members)",
               "camia": "helper texts (known members or non-members)", "ref": "a reference model",
               "dc_pdd": "a frequency table", "gds": "supervised (labelled training data)"}
    assert {m: table.loc[m, "needs"] for m in by_hand} == by_hand
    order = list(dict.fromkeys(table["needs"]))  # each group once, in the order shown
    assert order == ["statistics only", "extra passes of the target", "helper texts (known members or non-members)",
                     "a reference model", "a frequency table", "supervised (labelled training data)"]
    assert list(table["needs"]) == sorted(table["needs"], key=order.index)  # every group in one block
    assert (table["CLI (mia)"] == "✓").all()

    def offered(column: str) -> set[str]:
        return set(table.index[table[column] == "✓"])

    bench = tiny_app("app_pages/benchmark.py")
    bench_labels = set(bench.multiselect(key="bench_methods").proto.options)
    assert offered("Benchmark") == {m for m in METHODS if METHODS[m].label in bench_labels}
    assert {m for m in METHODS if METHODS[m].supervised is not None} <= offered("Benchmark")  # fitted there
    audit = tiny_app("app_pages/audit.py")
    audit_labels = set(audit.selectbox(key="audit_method").proto.options)
    assert offered("Audits (books, unlearning, long texts)") == {m for m in METHODS if METHODS[m].label in audit_labels}
    assert offered("Explore") == offered("Benchmark") and not {"ref", "dc_pdd"} & offered("Explore")

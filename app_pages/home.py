"""Home: what MIA Lens answers and what it cannot, where each user starts, and which method runs where."""
from __future__ import annotations

import pandas as pd
import streamlit as st

import mia_core
from mia_core import datasets
from mia_core.api import HELPER_NEEDS, REF_NEEDS, MethodSpec
from ui.places import PLACES
#: Groups of methods by what they need beyond one pass of the target, in the order shown.
GROUPS = ("statistics only", "extra passes of the target", "helper texts (known members or non-members)",
          "a reference model", "a frequency table", "supervised (labelled training data)")
#: Three steps for each user, each opening a page with the demo chosen: (page, label, query parameters).
PATHS = {
    "Auditor": [
        ("app_pages/audit.py", "1 · Audit the demo plays with the model that read some of them",
         {"model": "demo-known"}),
        ("app_pages/unlearning.py", "2 · Check an unlearning claim on demo paragraphs",
         {"model": "demo-known", "unlearn_source": "demo"}),
        ("app_pages/online.py", "3 · Find where a long text turns member-like",
         {"model": "demo-known", "online_source": "demo"}),
    ],
    "Researcher": [
        ("app_pages/benchmark.py", "1 · Benchmark the methods where membership is known",
         {"model": "demo-known", "bench_source": "Built-in demo set", "bench_set": "demo-wiki"}),
        ("app_pages/benchmark.py", "2 · The same texts under the base model: AUROC near 0.5",
         {"model": "demo", "bench_source": "Built-in demo set", "bench_set": "demo-wiki"}),
        ("app_pages/learn.py", "3 · Read each method's formula and what it needs", {}),
    ],
    "Teacher": [
        ("app_pages/learn.py", "1 · Show why Min-K%++ asks whether the true token is a mode", {}),
        ("app_pages/explore.py", "2 · Colour a text token by token under the demo-known model",
         {"model": "demo-known", "explore_methods": ["min_k_pp", "min_k"]}),
        ("app_pages/benchmark.py", "3 · Compare the demo-known and the base model on the same texts",
         {"model": "demo-known", "bench_source": "Built-in demo set", "bench_set": "demo-wiki"}),
    ],
}


def group(spec: MethodSpec) -> str:
    """What a method needs beyond one pass of the target, as one of GROUPS (the most demanding need wins)."""
    needs = set(spec.needs)
    if spec.supervised is not None:
        return GROUPS[5]
    if "freq" in needs:
        return GROUPS[4]
    if needs & set(REF_NEEDS):
        return GROUPS[3]
    if needs & set(HELPER_NEEDS):
        return GROUPS[2]
    return GROUPS[0] if spec.stats_only else GROUPS[1]


def methods_table() -> pd.DataFrame:
    """One row per registered method, grouped by need, with a ✓ where each place offers it."""
    rows = [{"needs": group(s), "method": s.label, "id": s.name, "cost": s.cost, "what it measures": s.summary,
             **{place.column: "✓" if place.offers(s) else "—" for place in PLACES}}
            for s in mia_core.METHODS.values()]
    table = pd.DataFrame(rows)
    table["order"] = table["needs"].map(GROUPS.index)
    return table.sort_values(["order", "method"], kind="stable").drop(columns="order").reset_index(drop=True)


st.title("MIA Lens")
st.markdown(
    "Was this text, or this book, in a language model's pretraining data? MIA Lens scores texts with "
    f"{len(mia_core.METHODS)} published membership-inference methods, shows which tokens drive each score, and "
    "measures how well each method separates known members from known non-members. The scores are **evidence "
    "consistent with membership, never proof**: a text can look familiar to a model because it is typical, quoted "
    "everywhere, or easy; only a comparison with a calibration set of the same kind, and a blind baseline that "
    "cannot explain the labels, makes a result meaningful."
)
st.subheader("Start here")
st.caption("Each step opens its page with the demo chosen: the **demo-known** model was trained on a random half of "
           "the demo texts, so membership is known; the base **demo** model never saw either half.")
for user, steps in PATHS.items():  # one row per journey: a link's label is never cut (links do not wrap)
    who, links = st.columns([1, 6], vertical_alignment="top")
    who.markdown(f"**{user}**")
    with links:
        for page, label, query in steps:
            st.page_link(page, label=label, query_params=query or None)
st.subheader("Methods, by what they need")
st.caption("✓: offered there, where the model's access allows it. Explore offers a supervised method once it is "
           "fitted on the Benchmark page; helper-text methods once known texts are chosen. The audits score every "
           "snippet or chunk with one pass of the model.")
st.dataframe(methods_table(), hide_index=True, key="home_methods")
st.subheader("Built-in labelled sets (known membership, offline)")
st.table(datasets.list_datasets())
st.caption("Members are a seeded random half that the `demo-known` model's adapter was trained on; the split is "
           "random, so the base `demo` model cannot tell the halves apart — that contrast is the lesson.")

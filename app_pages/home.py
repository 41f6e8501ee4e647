"""Home: what MIA Lens answers, and what it cannot."""
from __future__ import annotations

import streamlit as st

import mia_core

st.title("MIA Lens")
st.markdown(
    "Was this text, or this book, in a language model's pretraining data? MIA Lens scores texts with "
    "the published membership-inference methods — loss, zlib, Min-K% Prob, Min-K%++, DC-PDD, lowercase, "
    "reference model, and the heavier Infilling Score, Neighbourhood comparison and supervised GDS — "
    "shows which tokens drive each score, and measures how well each method separates "
    "known members from known non-members. The scores are **evidence consistent with membership, never "
    "proof**: a text can look familiar to a model because it is typical, quoted everywhere, or easy; only "
    "a comparison with a calibration set of the same kind, and a blind baseline that cannot explain the "
    "labels, makes a result meaningful."
)
c1, c2, c3, c4 = st.columns(4)
c1.page_link("app_pages/explore.py", label="Explore a text token by token", icon=":material/biotech:")
c2.page_link("app_pages/benchmark.py", label="Benchmark methods on labelled data", icon=":material/monitoring:")
c3.page_link("app_pages/audit.py", label="Audit books for contamination", icon=":material/menu_book:")
c4.page_link("app_pages/learn.py", label="Learn how each method works", icon=":material/school:")
st.subheader("Methods available")
st.table([{"method": s.name, "label": s.label, "access": ", ".join(s.access), "cost": s.cost,
           "what it measures": s.summary} for s in mia_core.METHODS.values()])
st.subheader("Built-in labelled sets (known membership, offline)")
st.table(mia_core.inputs.datasets.list_datasets())
st.caption("Members are a seeded random half that the `demo-known` model's adapter was trained on; the split is "
           "random, so the base `demo` model cannot tell the halves apart — that contrast is the lesson.")

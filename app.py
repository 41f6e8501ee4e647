"""MIA Lens dashboard entry page (placeholder until the dashboard issue): what the tool answers."""
from __future__ import annotations

import streamlit as st

import mia_core

st.set_page_config(page_title="MIA Lens", page_icon="🔎", layout="wide")
st.title("MIA Lens")
st.markdown(
    "Was this text, or this book, in a language model's pretraining data? MIA Lens scores texts "
    "with published membership-inference methods (loss, zlib, Min-K% Prob, Min-K%++, DC-PDD, "
    "lowercase, reference model) and evaluates them on labelled data. Scores are **evidence "
    "consistent with membership, never proof**: always read them next to a calibration set and the "
    "blind baseline."
)
st.subheader("Methods available")
st.table(
    [{"method": s.name, "label": s.label, "needs": " + ".join(s.needs), "what it measures": s.summary}
     for s in mia_core.METHODS.values()]
)
st.subheader("Built-in labelled sets (known membership, offline)")
st.table(mia_core.datasets.list_datasets())
st.caption("Members are a seeded random half that the `demo-known` model's adapter was trained on; "
           "the split is random, so the base `demo` model cannot tell the halves apart.")
st.info("The interactive pages (explore a text, benchmark methods, book audits) arrive with the dashboard. "
        "Meanwhile, the `mia` command line does everything: `mia score`, `mia eval`, `mia freq build`.")

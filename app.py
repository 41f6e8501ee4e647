"""MIA Lens dashboard: pages declared here, the model picker shared in the sidebar."""
from __future__ import annotations

import streamlit as st

from ui.models import model_sidebar

st.set_page_config(page_title="MIA Lens", page_icon="🔎", layout="wide")
navigation = st.navigation([
    st.Page("pages/home.py", title="Home", icon="🏠", default=True),
    st.Page("pages/explore.py", title="Explore a text", icon="🔬"),
    st.Page("pages/benchmark.py", title="Benchmark methods", icon="📈"),
    st.Page("pages/learn.py", title="Learn", icon="🎓"),
])
model_sidebar()
navigation.run()

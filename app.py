"""MIA Lens dashboard: pages declared here, the model picker shared in the sidebar."""
from __future__ import annotations

import streamlit as st

from ui.models import model_sidebar

st.set_page_config(page_title="MIA Lens", page_icon=":material/search:", layout="wide")
model_sidebar()
navigation = st.navigation([
    st.Page("app_pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("app_pages/explore.py", title="Explore a text", icon=":material/biotech:"),
    st.Page("app_pages/benchmark.py", title="Benchmark methods", icon=":material/monitoring:"),
    st.Page("app_pages/audit.py", title="Book audit", icon=":material/menu_book:"),
    st.Page("app_pages/unlearning.py", title="Unlearning audit", icon=":material/auto_delete:"),
    st.Page("app_pages/online.py", title="Long text, window by window", icon=":material/timeline:"),
    st.Page("app_pages/learn.py", title="Learn", icon=":material/school:"),
])
navigation.run()

"""MIA Lens dashboard: pages declared here, the model picker shared in the sidebar, page state kept in the URL.

The page paints before the model loads: the picker only records the choice, the page runs, and the model is
loaded under the sidebar's status afterwards (a page that needs it sooner loads it through `cached_model`).
"""
from __future__ import annotations

import streamlit as st

import mia_core
from ui.jobs import public_message
from ui.models import NotForThisPage, finish_loading, model_picker
from ui.query_state import restore, save

st.set_page_config(page_title="MIA Lens", page_icon=":material/search:", layout="wide")
navigation = st.navigation([
    st.Page("app_pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("app_pages/explore.py", title="Explore a text", icon=":material/biotech:"),
    st.Page("app_pages/benchmark.py", title="Benchmark methods", icon=":material/monitoring:"),
    st.Page("app_pages/audit.py", title="Book audit", icon=":material/menu_book:"),
    st.Page("app_pages/chat_extraction.py", title="Extract books from a chat API", icon=":material/forum:"),
    st.Page("app_pages/decop_quiz.py", title="DE-COP quiz on a chat API", icon=":material/quiz:"),
    st.Page("app_pages/unlearning.py", title="Unlearning audit", icon=":material/auto_delete:"),
    st.Page("app_pages/online.py", title="Long text, window by window", icon=":material/timeline:"),
    st.Page("app_pages/learn.py", title="Learn", icon=":material/school:"),
])
restore()
spec, status = model_picker()
try:
    navigation.run()
except mia_core.ModelLoadError as err:  # a page asked for the chosen model before the sidebar loaded it
    st.error(f"The model could not be loaded: {public_message(str(err))}")
except NotForThisPage as err:  # a chat API chosen on a page that reads log-probs
    st.info(str(err))
finish_loading(spec, status)
save(navigation.url_path)

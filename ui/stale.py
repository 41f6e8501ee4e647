"""Results that no longer match the page: kept visible but greyed, under a line saying what they were computed for.

A result is stamped (`mia_core.stamp`) with its model, text and settings when it is computed. When the sidebar
model, the text or the BOS policy changes afterwards, the page still shows the old result, greyed, with
"computed for model X on text “…” (hash) — press Score to recompute", never as if it belonged to the new input.
"""
from __future__ import annotations

import streamlit as st

from mia_core.stamp import ResultStamp
from ui.reference_view import plain

#: Greyed results: the container of stale results carries this key (Streamlit adds the class `st-key-<key>`).
STALE_KEY = "explore_results_stale"
STALE_CSS = (f"<style>.st-key-{STALE_KEY}{{opacity:0.45;filter:grayscale(0.85)}}"
             f".st-key-{STALE_KEY}:hover{{opacity:0.7}}</style>")


def stale_line(stamp: ResultStamp, changed: list[str]) -> str:
    """The warning over stale results: what they were computed for, what changed, what to do."""
    return (f"These results were computed for model {plain(stamp.model)} on text “{plain(stamp.text_preview)}” "
            f"({stamp.short_hash}), BOS {stamp.bos} — {' and '.join(changed)} changed since: press Score to recompute.")


def results_container(stamp: ResultStamp, model: str | None, text: str, bos: str):
    """The container to draw results in: greyed under a warning when the page's model, text or BOS policy is no longer
    what they were computed for."""
    changed = stamp.changed(model, text, bos)
    if not changed:
        return st.container(key="explore_results")
    st.warning(stale_line(stamp, changed), icon=":material/history:")
    st.html(STALE_CSS)
    return st.container(key=STALE_KEY)

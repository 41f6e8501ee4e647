"""Results that no longer match the page: kept visible but greyed, under a line saying what they were computed for.

A result is stamped (`mia_core.stamp`) with its model, text and settings when it is computed. When the sidebar
model, the text or the BOS policy changes afterwards, the page still shows the old result, greyed, with
"computed for model X on text “…” (hash) — press Score to recompute", never as if it belonged to the new input.
"""
from __future__ import annotations

import streamlit as st

from mia_core.stamp import ResultStamp
from ui.markdown import md

#: Greyed results: the container of stale results carries this key (Streamlit adds the class `st-key-<key>`).
STALE_KEY = "explore_results_stale"


def stale_line(stamp: ResultStamp, changed: list[str], button: str = "Score") -> str:
    """The warning over stale results: what they were computed for, what changed, what to do."""
    return (f"These results were computed for model {md(stamp.model)} on text “{md(stamp.text_preview)}” "
            f"({stamp.short_hash}), BOS {stamp.bos} — {' and '.join(changed)} changed since: press {button} to "
            "recompute.")


def stale_css(key: str) -> str:
    """The style that greys the container of stale results keyed `key`."""
    return f"<style>.st-key-{key}{{opacity:0.45;filter:grayscale(0.85)}}.st-key-{key}:hover{{opacity:0.7}}</style>"


STALE_CSS = stale_css(STALE_KEY)


def results_container(stamp: ResultStamp, model: str | None, text: str, bos: str, *, key: str = "explore_results",
                      button: str = "Score", also_changed: tuple[str, ...] = ()):
    """The container to draw results in (keyed `key`): greyed (keyed `key`_stale) under a warning when the page's
    model, text or BOS policy — or what `also_changed` names — is no longer what they were computed for."""
    changed = stamp.changed(model, text, bos) + list(also_changed)
    if not changed:
        return st.container(key=key)
    st.warning(stale_line(stamp, changed, button), icon=":material/history:")
    st.html(stale_css(f"{key}_stale"))
    return st.container(key=f"{key}_stale")

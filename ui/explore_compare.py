"""Explore's comparison: the previous model's result beside the new one for the same text, each under its stamp.

Scoring a text with one model, then the same text (and BOS policy) with another keeps the first request aside; both are
drawn in two columns with the statistics-only methods chosen on the page (the same methods and parameters for both,
recomputed from each model's cached statistics), each column under the model, text and settings it belongs to. Only
the previous result is kept; scoring a different text (or under another BOS policy) drops it, and a button clears it.
"""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import mia_core
from mia_core.heatmap import panel_html
from mia_core.limits import heatmap_pages
from mia_core.stamp import ResultStamp, stamp_for
from ui.model_work import queued
from ui.models import cached_model, cached_stats
from ui.params import flat
from ui.markdown import md
from ui.token_views import explore_panel
from ui.work_estimate import count_tokens

#: Session key of the previous model's scored request (a `Scored`), while it is compared.
PREVIOUS = "explore_previous"


@dataclass(frozen=True)
class Scored:
    """A request the page scored: the model's spec and fingerprint, the text and the BOS policy."""

    spec: str
    fingerprint: str
    text: str
    bos: str


def next_previous(previous: Scored | None, old: Scored | None, new: Scored) -> Scored | None:
    """What to compare the new request with: the old one when only the model changed; nothing once the text or the BOS
    policy changed, or when the kept one is the new request's model; else what was kept."""
    if old is None or old.text != new.text or old.bos != new.bos:
        return None
    if old.spec != new.spec:
        return old
    return None if previous is None or previous.spec == new.spec else previous


def remember_scored(old: Scored | None, new: Scored) -> None:
    """On a Score press: keep the old request aside when only the model changed, drop it otherwise."""
    kept = next_previous(st.session_state.get(PREVIOUS), old, new)
    if kept is None:
        st.session_state.pop(PREVIOUS, None)
    else:
        st.session_state[PREVIOUS] = kept


def stamp_line(stamp: ResultStamp, n_scored: int) -> str:
    """The stamp above a column: model and fingerprint, text and hash, BOS policy and the methods' settings."""
    settings = "".join(f", {name} {value}" for name, value in stamp.settings)
    return (f"model **{md(stamp.model)}** (fingerprint `{stamp.fingerprint[:12]}`) · text “{md(stamp.text_preview)}” "
            f"(sha256 `{stamp.short_hash}`, {n_scored} tokens) · BOS {stamp.bos}{settings}")


def shown_page(page: tuple[int, int], n_scored: int) -> tuple[int, int]:
    """The page of tokens shown on the page, or this model's first page when its tokenizer gives fewer tokens."""
    return page if page[1] <= n_scored else heatmap_pages(n_scored)[0]


def draw_column(which: str, title: str, scored: Scored, stats, decode, methods: list[str], values: dict,
                scale_how: str, reference_tokens, page: tuple[int, int]) -> None:
    """One model's column: its title and stamp, then each method's score (labelled with the model) and heatmap."""
    stamp = stamp_for(scored.spec, scored.fingerprint, scored.text, scored.bos, **flat({m: values[m] for m in methods}))
    with st.container(border=True, key=f"explore_compare_{which}"):
        st.markdown(f"#### {title}")
        st.caption(stamp_line(stamp, stats.n_scored))
        for method in methods:
            label = f"{mia_core.METHODS[method].label} · {md(scored.spec)}"
            try:
                score = mia_core.score(method, stats, **values[method])
            except ValueError as err:
                st.error(f"{label}: {err}")
                continue
            panel = explore_panel(method, score, scale_how, reference_tokens, scored.spec, scored.bos, values[method])
            st.metric(label, f"{score.value:.4f}", help=mia_core.METHODS[method].summary)
            st.html(panel_html(stats, panel, decode, shown_page(page, stats.n_scored),
                               element_id=f"compare-{which}-{method}"))


def draw_comparison(current: Scored, stats, methods: list[str], values: dict, scale_how: str, reference_tokens,
                    page: tuple[int, int]) -> bool:
    """The previous model's result beside this one for the same text (nothing when none is kept or no statistics-only
    method is chosen), with a button that clears it; whether it was drawn."""
    previous = st.session_state.get(PREVIOUS)
    if previous is None or not methods or previous.text != current.text or previous.bos != current.bos:
        return False
    st.subheader("Side by side: the previous model and this one")
    try:
        with st.spinner(f"Statistics of the text under {md(previous.spec)} …"):
            before = queued(lambda: cached_stats(previous.spec, (previous.text,), previous.bos)[0], "Scoring a text",
                            count_tokens(previous.spec, (previous.text,), previous.bos))
            decode_before = cached_model(previous.spec).tokenizer.decode
    except mia_core.ModelLoadError as err:  # e.g. a local folder removed since: nothing to compare with any more
        st.session_state.pop(PREVIOUS, None)
        st.warning(f"The previous model {md(previous.spec)} no longer loads, so it is not compared: {md(str(err))}")
        return False
    left, right = st.columns(2)
    with left:
        draw_column("previous", f"Previous model: {md(previous.spec)}", previous, before, decode_before, methods,
                    values, scale_how, reference_tokens, page)
    with right:
        draw_column("current", f"This model: {md(current.spec)}", current, stats,
                    cached_model(current.spec).tokenizer.decode, methods, values, scale_how, reference_tokens, page)
    if st.button("Clear the comparison", key="explore_compare_clear",
                 help="Forget the previous model's result; scoring a different text forgets it too."):
        st.session_state.pop(PREVIOUS, None)
        st.rerun()
    st.divider()
    return True

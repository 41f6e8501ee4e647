"""Explore's colour scale: "fixed per method" (the same score gets the same colour in every text), "known
non-members" or "this text".

Fixed is the default: the range the method declares (`MethodSpec.token_range`; a method that declares none falls
back to the text's own range, and the legend says so). "Known non-members" takes the 5th–95th percentile of the
token scores of the known non-members chosen on the page under this model (methods that need only the statistics;
their texts are read once, so it is offered, not the default). "This text" spreads the colours over the text's own
5th–95th percentiles, which shows its contrasts best but makes colours incomparable between texts.
"""
from __future__ import annotations

import numpy as np
import streamlit as st

import mia_core
from mia_core.heatmap import Scale, colour_scale, fixed_scale, reference_scale
from mia_core.reference import demo_split
from ui.models import cached_stats
from ui.reference_view import DEMO, TEXTS

FIXED, REFERENCE, THIS_TEXT = "fixed per method", "known non-members", "this text"
#: Known non-member texts the reference scale reads at most (their percentiles settle long before).
MAX_SCALE_TEXTS = 200


def scale_ui() -> str:
    """The colour-scale choice (the known non-members' range once a reference is chosen below)."""
    return st.radio("Colour scale", [FIXED, REFERENCE, THIS_TEXT], horizontal=True, key="explore_scale",
                    help="Fixed per method: the same token score gets the same colour in every text (the range the "
                         "method declares). Known non-members: the range of the token scores of the known non-members "
                         "chosen below, under this model (read once; same colours across texts too). This text: the "
                         "colours spread over this text's own range (contrasts within it show best; colours cannot be "
                         "compared between texts).")


@st.cache_data(show_spinner=False, max_entries=1)
def demo_reference_texts() -> tuple[str, ...]:
    """The texts of the demo's reference set (the seeded half of the demo-wiki non-members), read once."""
    return tuple(demo_split()[0]["text"].tolist()[:MAX_SCALE_TEXTS])


def reference_texts(choice: tuple[str, object]) -> tuple[tuple[str, ...], str] | None:
    """The known non-member texts behind the reference choice (at most MAX_SCALE_TEXTS), or None (none chosen, or a
    saved reference set, which keeps scores but not texts)."""
    how, given = choice
    if how == DEMO:
        return demo_reference_texts(), "the demo's known non-members"
    if how == TEXTS and given is not None:
        texts, name = given
        return tuple(texts[:MAX_SCALE_TEXTS]), f"the known non-members of {name}"
    return None


@st.cache_data(show_spinner=False, max_entries=32)
def reference_token_scores(spec: str, texts: tuple[str, ...], bos: str, method: str, params: tuple) -> list[np.ndarray]:
    """The token scores of the reference texts under one method (statistics cached; no extra model pass)."""
    out = []
    for stats in cached_stats(spec, texts, bos):
        try:
            out.append(np.asarray(mia_core.score(method, stats, **dict(params)).token_scores, dtype=np.float64))
        except ValueError:  # a text the method cannot score (e.g. no word to tag): left out of the range
            continue
    return out


def scale_for(method: str, values: np.ndarray, how: str, reference: tuple[tuple[str, ...], str] | None, spec: str,
              bos: str, params: dict) -> tuple[Scale, str]:
    """The (low, centre, high) to colour a method's token scores with, and the legend's note on where it comes from."""
    spec_ = mia_core.METHODS[method]
    centre = spec_.centre
    if how == REFERENCE and reference is not None and spec_.stats_only:
        texts, source = reference
        with st.spinner(f"Reading the token scores of {source} once for the colour scale …"):
            scores = reference_token_scores(spec, texts, bos, method, tuple(sorted(params.items())))
        if scores:
            return reference_scale(scores, centre=centre), (f"fixed: 5th–95th percentile of the token scores of "
                                                            f"{len(scores)} of {source}")
    if how in (FIXED, REFERENCE) and spec_.token_range is not None:
        low, high = spec_.token_range
        unmet = " (no known non-members with their texts chosen below)" if how == REFERENCE else ""
        return fixed_scale(spec_.token_range, centre=centre), f"fixed for {spec_.label}: {low:g} to {high:g}{unmet}"
    note = "this text: its 5th–95th percentile" if how == THIS_TEXT else (
        f"this text's 5th–95th percentile ({spec_.label} declares no fixed range)")
    return colour_scale(np.asarray(values, dtype=np.float64), centre=centre), note

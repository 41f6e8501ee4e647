"""Explore's colour scale: "fixed per method" (the same score gets the same colour in every text), "known
non-members" or "this text". The scale itself is chosen in the core (`mia_core.heatmap.panel`); this module offers
the choice and reads the known non-members' token scores (once, cached, with a spinner).

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
from mia_core.reference import demo_split
from ui.models import cached_stats
from ui.reference_view import DEMO, TEXTS

FIXED, REFERENCE, THIS_TEXT = "fixed per method", "known non-members", "this text"
#: The choices as the core's scale names (`mia_core.heatmap.SCALES`).
SCALE_NAMES = {FIXED: "fixed", REFERENCE: "reference", THIS_TEXT: "text"}
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


def reference_scores(method: str, how: str, reference: tuple[tuple[str, ...], str] | None, spec: str, bos: str,
                     params: dict) -> list[np.ndarray] | None:
    """The reference texts' token scores under a statistics-only method when the known non-members' scale is chosen
    (read once, with a spinner); None otherwise (the core then falls back to the fixed scale and says so)."""
    if how != REFERENCE or reference is None or not mia_core.METHODS[method].stats_only:
        return None
    texts, source = reference
    with st.spinner(f"Reading the token scores of {source} once for the colour scale …"):
        return reference_token_scores(spec, texts, bos, method, tuple(sorted(params.items())))

"""Explore's "compared with known non-members": a reference set, the text's p-value and where it falls.

A raw score ("Min-K%++ = −1.19") means little alone; against a reference set of known non-members of
the same kind it becomes "scores higher than 97% of 120 known non-members (p = 0.03)". The reference
is the demo's built-in one, known non-members uploaded here, or a saved reference set (`mia reference
build`) whose model and settings must match the page's. The first two are scored once per model and
setting, in the background (`ui.reference_jobs`: the result shows at once, the p-value's place says how far the
scoring is), and kept in the cache (`mia_core.reference.cache`): later texts and later sessions reuse them.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import mia_core
from mia_core.inputs.tables import InputError, read_texts
from mia_core.limits import check_request_cost
from mia_core.model.builtin import BUILTIN_NAMES
from mia_core.model.identity import text_sha256
from mia_core.reference import (
    ReferenceSet, check_demo_model, check_model, compare, demo_texts, in_words, load_reference, setting_conflicts,
)
from ui.helpers import UPLOAD_TYPES, read_upload
from ui.markdown import md
from ui.models import cached_model
from ui.reference_jobs import reference_or_start
from ui.work_estimate import count_tokens, device_type, request_passes

#: Known non-members an upload may hold: each is scored once on this server (a bound on visitors' work).
MAX_REFERENCE_TEXTS = 1000
#: Colour of the reference histogram and of the text's marker (the marker stands out in every theme).
REFERENCE_COLOUR, TEXT_COLOUR = "#8c9bab", "#d62728"
NONE, DEMO, TEXTS, SAVED = ("None", "The demo's known non-members", "Upload known non-members",
                            "Upload a saved reference set")
#: Where a scored reference set is kept, in words (no server path is shown to visitors).
KEPT = ("The known non-members' scores are computed once per model and setting and kept in this server's MIA Lens "
        "cache (`references/` under `$MIA_LENS_CACHE`, by default `~/.cache/mia-lens`): later texts and later sessions "
        "reuse them; another model, setting or code version scores them again.")


@dataclass(frozen=True)
class PendingReference:
    """A reference set being scored in the background (`ui.reference_jobs`): its job's key and what it scores."""

    key: tuple
    what: str


def scored_reference(spec: str, texts: Sequence[str], source: str, methods: list[str], k: float | None, bos: str,
                     params: dict, what: str) -> ReferenceSet | PendingReference:
    """The reference set of `texts` under this model and setting: kept from an earlier text, session or visitor, else
    scored in the background (in the server's line for the model) while the page shows its result."""
    setting = {"k": k, "bos": bos, "params": params, "source": source}
    reference, key = reference_or_start(spec, cached_model(spec), list(texts), list(methods), setting)
    return reference if reference is not None else PendingReference(key, what)


def reference_source_ui(spec: str | None) -> tuple[str, object]:
    """Where the known non-members come from: (choice, uploaded texts with their file name, or a saved set)."""
    options = ([DEMO] if spec in BUILTIN_NAMES else []) + [TEXTS, SAVED, NONE]
    how = st.radio("Compare with known non-members (p-value)", options, horizontal=True,
                   key="explore_reference_source",
                   help="Known non-members of the same kind as the text (written after the model's training cutoff, "
                        "or held out from it): the p-value says how rarely such texts score this high.")
    if how == TEXTS:
        upload = st.file_uploader("Known non-member texts (a `text` column)", type=UPLOAD_TYPES,
                                  key="explore_reference_texts",
                                  help=f"Up to {MAX_REFERENCE_TEXTS:,} texts; they are scored once with this model.")
        if upload is None:
            return how, None
        try:
            texts = read_upload(upload, read_texts)["text"].tolist()
        except InputError as err:
            st.error(str(err))
            return how, None
        if len(texts) > MAX_REFERENCE_TEXTS:
            st.error(f"{len(texts):,} texts: a reference upload here holds at most {MAX_REFERENCE_TEXTS:,} "
                     "(build larger ones with `mia reference build`).")
            return how, None
        return how, (tuple(texts), upload.name)
    if how == SAVED:
        files = st.file_uploader("reference.json and scores.csv from `mia reference build`", type=["json", "csv"],
                                 accept_multiple_files=True, key="explore_reference_saved")
        return how, saved_reference(files) if files else None
    return how, None


def saved_reference(files) -> ReferenceSet | None:
    """A saved reference set from its two uploaded files, or None with the problem shown."""
    names = sorted(Path(f.name).name for f in files)
    if names != ["reference.json", "scores.csv"]:
        st.error("Upload exactly the two files of a reference set folder: reference.json and scores.csv.")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        for upload in files:
            (Path(tmp) / Path(upload.name).name).write_bytes(upload.getvalue())
        try:
            return load_reference(Path(tmp))
        except ValueError as err:
            st.error(str(err).replace(tmp, "the upload"))
            return None


def resolve_reference(choice: tuple[str, object], spec: str, methods: list[str], k: float | None,
                      bos: str, params: dict | None = None) -> ReferenceSet | PendingReference | None:
    """The reference set for this model and setting (kept or checked), a `PendingReference` while it is scored in
    the background, or None with the reason shown; `params`: the methods' parameters other than k that differ from
    their defaults."""
    how, given = choice
    params = dict(params or {})
    if how == NONE or given is None and how != DEMO:
        return None
    try:
        if how == DEMO:
            check_demo_model(cached_model(spec))
            texts, source = demo_texts()
            reference = scored_reference(spec, texts, source, methods, k, bos, params,
                                         f"the demo's {len(texts):,} known non-members")
            if isinstance(reference, ReferenceSet):
                st.caption(KEPT)
            return reference
        if how == TEXTS:
            texts, name = given
            cost = count_tokens(spec, texts, bos) * request_passes(methods)
            check_request_cost(cost, device_type(spec), f"Scoring {len(texts):,} known non-members")
            reference = scored_reference(spec, list(texts), name, methods, k, bos, params,
                                         f"{len(texts):,} uploaded known non-members")
            if isinstance(reference, ReferenceSet):
                st.caption(KEPT)
            return reference
        reference = given
        lm = cached_model(spec)
        check_model(reference, lm.fingerprint, lm.name)
        conflicts = setting_conflicts(reference, k=k if reference.k is not None else None, bos=bos,
                                      long_text=reference.long_text)
        if dict(reference.params) != params:
            conflicts.append(f"parameters {params or 'at their defaults'} (the reference used "
                             f"{reference.params or 'the defaults'})")
        if conflicts:
            st.warning("This reference set was scored with other settings: " + "; ".join(conflicts)
                       + ". Set them the same on this page to compare.")
            return None
        return reference
    except ValueError as err:
        st.error(str(err))
        return None


def reference_figure(reference_scores: np.ndarray, score: float, label: str) -> go.Figure:
    """The reference's score histogram with this text's score marked."""
    fig = go.Figure(go.Histogram(x=reference_scores, nbinsx=30, marker_color=REFERENCE_COLOUR, opacity=0.75,
                                 name="known non-members"))
    fig.add_vline(x=score, line_color=TEXT_COLOUR, line_width=3, annotation_text="this text",
                  annotation_font_color=TEXT_COLOUR)
    fig.update_layout(height=200, margin={"t": 25, "b": 35, "l": 40, "r": 10}, showlegend=False,
                      xaxis_title=f"{label} score (higher = more member-like)", yaxis_title="texts")
    return fig


def reference_section(reference: ReferenceSet, stats, scores: dict[str, float]) -> None:
    """Per method: the text's p-value and percentile in words, and the reference histogram with the text marked."""
    shown = {m: v for m, v in scores.items() if m in reference.methods}
    if not shown:
        return
    result, notes = compare(reference, pd.DataFrame({m: [v] for m, v in shown.items()}), [stats.text],
                            [stats.n_scored])
    st.markdown(f"**Compared with known non-members**: {md(reference.describe())}. The p-value is the share of them (plus this text) that score at "
                "least as high: small p = unusually member-like for a text of this kind.")
    for column, (method, value) in zip(st.columns(len(shown)), shown.items()):
        label = mia_core.METHODS[method].label
        with column:
            st.markdown(f"**{label}** {in_words(result[f'p_{method}'][0], result[f'pct_{method}'][0], reference.size)}")
            others = reference.table.loc[reference.table["sha256"] != text_sha256(stats.text), method]
            st.plotly_chart(reference_figure(others.to_numpy(dtype=float), value, label),
                            width="stretch", key=f"explore_reference_{method}")
    for note in notes:
        st.caption(f"Note: {md(note)}.")
    st.caption("A p-value is valid when the text is of the same kind as the known non-members (source, period, "
               "length); it says how unusual the score is, not that the text was trained on.")

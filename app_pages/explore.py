"""Explore a text: per-token heatmaps for any token-level method, side by side, redrawn without the model.

Methods that need nothing but the statistics redraw instantly; methods that run the target model
again (more passes) are computed only when asked, and their results are kept for the session.
"""
from __future__ import annotations

import pandas as pd
import streamlit as st

import mia_core
from mia_core.heatmap import heatmap_html
from mia_core.inputs.documents import MAX_UPLOAD_BYTES, DocumentError, document_text
from mia_core.methods import methods_for, reading, stats_only_methods
from ui.models import cached_model, cached_stats

#: Methods that need nothing but the target's statistics: switching between them is free.
STATS_ONLY = stats_only_methods()
#: Methods that run the target model again: computed on request (they cost more), kept per session.
EXTRA_PASSES = [name for name in methods_for(("stats", "lm")) if name not in STATS_ONLY]
SAMPLE = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
          "foolishness, it was the epoch of belief, it was the epoch of incredulity.")


def text_input_ui() -> str:
    """The text to explore: pasted, or read from an uploaded .txt/.md/.pdf/.epub."""
    upload = st.file_uploader("Upload a document", type=["txt", "md", "pdf", "epub"],
                              help=f"Up to {MAX_UPLOAD_BYTES // 1_000_000} MB.")
    if upload is not None:
        try:
            text = document_text(upload.name, upload.getvalue())
            st.caption(f"{upload.name}: {len(text.split()):,} words")
            return text
        except DocumentError as err:
            st.error(str(err))
            return ""
    return st.text_area("Text", value=SAMPLE, height=150, key="explore_text")


def label_and_cost(method: str) -> str:
    spec = mia_core.METHODS[method]
    return f"{spec.label} ({spec.cost})"


def session_classifier():
    """The GDS classifier fitted on the Benchmark page in this session for the current model, if any."""
    fitted = st.session_state.get("gds_classifier")
    return fitted["classifier"] if fitted and fitted["model"] == st.session_state.get("model_spec") else None


def method_ui() -> tuple[list[str], list[str], float]:
    """Up to two statistics-only methods side by side, methods that run the model again, and k."""
    methods = st.multiselect("Methods (two are shown side by side)", STATS_ONLY, default=["min_k_pp", "min_k"],
                             max_selections=2, format_func=lambda m: mia_core.METHODS[m].label, key="explore_methods")
    offered = EXTRA_PASSES + (["gds"] if session_classifier() is not None else [])
    extra = st.multiselect("Methods that run the model again (computed when you ask: they cost more)", offered,
                           format_func=label_and_cost, key="explore_extra") if offered else []
    if "gds" in offered:
        st.caption(f"GDS uses the classifier fitted on the Benchmark page: {session_classifier().describe()}.")
    else:
        st.caption("GDS is supervised (an MLP learns from labelled texts): fit it on the Benchmark page for this "
                   "model and it appears here.")
    k = st.slider("k: fraction of tokens in the min-k% selection", 0.05, 1.0, 0.2, 0.05, key="explore_k")
    return methods, extra, k


def method_params(method: str, k: float) -> dict:
    """k where the method takes one; GDS's classifier from this session."""
    params = {"k": k} if "k" in mia_core.METHODS[method].param_names else {}
    if "classifier" in mia_core.METHODS[method].needs:
        params["classifier"] = session_classifier()
    return params


def draw_score(stats, method: str, score: mia_core.Score, decode) -> None:
    """A method's sequence score, its reading, the heatmap of its token scores, and its details."""
    st.metric(mia_core.METHODS[method].label, f"{score.value:.4f}")
    st.caption(reading(method, score.value))
    st.html(heatmap_html(stats, score.token_scores, score.selected, centre=mia_core.METHODS[method].centre, decode=decode,
                         element_id=f"heatmap-{method}"))
    draw_details(score.details)


def draw_details(details: dict) -> None:
    """Every list of dicts as a table under its name; other entries in one caption."""
    tables = {name: value for name, value in details.items()
              if isinstance(value, list) and value and all(isinstance(row, dict) for row in value)}
    facts = [f"{name}: {value}" for name, value in details.items() if name not in tables]
    if facts:
        st.caption(" · ".join(facts))
    for name, rows in tables.items():
        st.markdown(f"**{name}**")
        st.dataframe(pd.DataFrame(rows), hide_index=True)


def at_k(method: str, result: tuple[float, mia_core.Score], k: float) -> mia_core.Score | None:
    """The stored result redrawn for k without the model when possible (`Score.at_k`); else None."""
    k_then, score = result
    if k_then == k or "k" not in mia_core.METHODS[method].param_names:
        return score
    return score.at_k(k)


def extra_pass_section(stats, request: tuple, extra: list[str], k: float, decode) -> None:
    """Compute the chosen methods that run the model again on a button press, then draw them."""
    store = st.session_state.get("explore_extra_results")
    if store is None or store["request"] != request:  # a new text, model or BOS policy: start afresh
        store = st.session_state["explore_extra_results"] = {"request": request, "results": {}}
    results = store["results"]
    todo = [m for m in extra if m not in results or
            not isinstance(results[m][1], str) and at_k(m, results[m], k) is None]
    if todo and st.button("Compute " + ", ".join(mia_core.METHODS[m].label for m in todo), key="explore_extra_run",
                          help="Runs the model again: " + "; ".join(label_and_cost(m) for m in todo)):
        lm = cached_model(request[0])
        for method in todo:
            with st.spinner(f"Running {label_and_cost(method)} …"):
                try:
                    results[method] = (k, mia_core.score(method, stats, lm=lm, **method_params(method, k)))
                except ValueError as err:
                    results[method] = (k, str(err))
    elif todo:
        st.caption("Not computed yet: " + "; ".join(label_and_cost(m) for m in todo) + ".")
    ready = [m for m in extra if m in results and (isinstance(results[m][1], str) or at_k(m, results[m], k))]
    for column, method in zip(st.columns(len(ready)) if ready else [], ready):
        with column:
            if isinstance(results[method][1], str):
                st.error(f"{mia_core.METHODS[method].label}: {results[method][1]}")
            else:
                draw_score(stats, method, at_k(method, results[method], k), decode)


st.title("Explore a text")
spec = st.session_state.get("model_spec")
text = text_input_ui()
methods, extra, k = method_ui()
bos = st.radio("BOS policy", ["auto", "none"], horizontal=True, key="explore_bos",
               help="auto: prepend the document-boundary token so every token is scored; none: as the reference code.")
if st.button("Score", type="primary", disabled=spec is None or not text.strip()):
    st.session_state["explore_request"] = (spec, text, bos)
request = st.session_state.get("explore_request")
if spec is None:
    st.warning("Load a model in the sidebar first.")
elif request is not None and (methods or extra):
    req_spec, req_text, req_bos = request
    with st.spinner("Running the model …"):
        stats = cached_stats(req_spec, (req_text,), req_bos)[0]
    if stats.n_scored == 0:
        st.error("Nothing to score: the text is empty.")
    else:
        if stats.long_text != "none":
            what = "scored in sliding windows with at least half a context of left context" \
                if stats.long_text == "sliding" else "truncated to the context"
            st.info(f"The text has {stats.n_text_tokens:,} tokens, more than the model's context: it was {what}.")
        tokenizer = cached_model(req_spec).tokenizer
        if methods:
            for column, method in zip(st.columns(len(methods)), methods):
                with column:
                    draw_score(stats, method, mia_core.score(method, stats, **method_params(method, k)),
                               tokenizer.decode)
        if extra:
            st.subheader("Methods that run the model again")
            extra_pass_section(stats, request, extra, k, tokenizer.decode)
        st.caption(f"{stats.n_scored} tokens scored"
                   + (f"; boundary token {stats.boundary_token!r} prepended" if stats.boundary_token else "")
                   + ". Hover a token for log p, μ, σ, its rank and the model's top-1 alternative.")

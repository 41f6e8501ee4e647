"""Explore a text: per-token heatmaps for any token-level method, side by side, redrawn without the model."""
from __future__ import annotations

import streamlit as st

import mia_core
from mia_core.documents import MAX_UPLOAD_BYTES, DocumentError, document_text
from mia_core.heatmap import heatmap_html
from ui.models import cached_model, cached_stats
from ui.readings import reading

#: Methods that need nothing but the target's statistics: switching between them is free.
STATS_ONLY = [name for name, spec in mia_core.METHODS.items() if spec.needs == ("stats",)]
CENTRES = {"min_k_pp": 0.0}
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


def method_ui() -> tuple[list[str], float]:
    """Up to two methods to draw side by side, and k."""
    methods = st.multiselect("Methods (two are shown side by side)", STATS_ONLY, default=["min_k_pp", "min_k"],
                             max_selections=2, format_func=lambda m: mia_core.METHODS[m].label, key="explore_methods")
    k = st.slider("k: fraction of tokens in the min-k% selection", 0.05, 1.0, 0.2, 0.05, key="explore_k")
    return methods, k


def draw_method(stats, method: str, k: float, decode) -> None:
    """A method's sequence score, its reading, and the heatmap of its token scores."""
    params = {"k": k} if "k" in mia_core.METHODS[method].param_names else {}
    score = mia_core.score(method, stats, **params)
    st.metric(mia_core.METHODS[method].label, f"{score.value:.4f}")
    st.caption(reading(method, score.value))
    st.html(heatmap_html(stats, score.token_scores, score.selected, centre=CENTRES.get(method), decode=decode,
                         element_id=f"heatmap-{method}"))


st.title("Explore a text")
spec = st.session_state.get("model_spec")
text = text_input_ui()
methods, k = method_ui()
bos = st.radio("BOS policy", ["auto", "none"], horizontal=True, key="explore_bos",
               help="auto: prepend the document-boundary token so every token is scored; none: as the reference code.")
if st.button("Score", type="primary", disabled=spec is None or not text.strip()):
    st.session_state["explore_request"] = (spec, text, bos)
request = st.session_state.get("explore_request")
if spec is None:
    st.warning("Load a model in the sidebar first.")
elif request is not None and methods:
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
        columns = st.columns(len(methods))
        for column, method in zip(columns, methods):
            with column:
                draw_method(stats, method, k, tokenizer.decode)
        st.caption(f"{stats.n_scored} tokens scored"
                   + (f"; boundary token {stats.boundary_token!r} prepended" if stats.boundary_token else "")
                   + ". Hover a token for log p, μ, σ, its rank and the model's top-1 alternative.")

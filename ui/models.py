"""The sidebar model picker shared by every page, and the cached model and statistics."""
from __future__ import annotations

import streamlit as st

import mia_core
from mia_core import LanguageModel, TokenStats

BUILT_IN = {
    "demo": "SmolLM2-135M — embedded, offline",
    "demo-known": "SmolLM2-135M + demo-known adapter (knows the demo members)",
    "other": "Another model: hub id or local folder",
}


@st.cache_resource(show_spinner=False, max_entries=3)
def cached_model(spec: str) -> LanguageModel:
    """One loaded model per spec for the whole server (models are large; never copy them)."""
    return mia_core.load_model(spec)


@st.cache_data(show_spinner=False, max_entries=256)
def cached_stats(spec: str, texts: tuple[str, ...], bos: str = "auto") -> list[TokenStats]:
    """Token statistics of texts under a model: computed once, then every method and k reuses them."""
    return cached_model(spec).token_stats(list(texts), bos=bos)


def model_sidebar() -> str | None:
    """Draw the picker; returns the spec of the loaded model (or None), kept in session state."""
    bar = st.sidebar
    bar.header("Model")
    choice = bar.radio("Model", list(BUILT_IN), format_func=BUILT_IN.get, key="model_choice", label_visibility="collapsed")
    spec = choice
    if choice == "other":
        spec = bar.text_input("Hub id or local folder", key="model_other", placeholder="EleutherAI/pythia-160m").strip()
        if not spec:
            bar.info("Enter a model name or folder.")
            return None
    try:
        with bar.status(f"Loading {spec} …", expanded=False) as status:
            lm = cached_model(spec)
            status.update(label=f"Loaded {spec}", state="complete")
    except mia_core.ModelLoadError as err:
        bar.error(str(err))
        st.session_state.pop("model_spec", None)
        return None
    st.session_state["model_spec"] = spec
    bar.caption(f"{lm.name}\n\ndevice **{lm.device}**, dtype **{str(lm.dtype).removeprefix('torch.')}**, "
                f"context {lm.max_length:,} tokens, fingerprint `{lm.fingerprint}`")
    return spec

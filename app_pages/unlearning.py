"""Unlearning audit (Min-K% paper §7): chunks the unlearned model still scores like the original did.

Both models' passes run in one turn in the server's line (`ui.model_work`); their tokens (counted with the
original's tokenizer, × 2 models) are told and bounded before it runs (`ui.work_estimate`).
"""
from __future__ import annotations

from pathlib import Path

import streamlit as st

import mia_core
from mia_core import datasets
from mia_core.audit.unlearning import UnlearningParams, audit_unlearning
from mia_core.csv_safe import to_csv_safe
from mia_core.inputs.documents import MAX_UPLOAD_BYTES, DocumentError, document_text
from mia_core.limits import (
    MAX_REQUEST_CHARS, MAX_UPLOAD_FILES, RequestTooLarge, check_request_chars, check_request_cost, check_upload_set,
)
from ui.jobs import public_message
from ui.model_work import model_turn
from ui.models import BUILT_IN, cached_model, pick_one_method
from ui.params import param_widgets, shown
from ui.places import AUDITS, UNLEARN_SOURCE, UNLEARN_WORDS, label
from ui.windows import ratio_figure
from ui.work_estimate import count_tokens, device_type, estimate_line

#: The method chosen on a first visit (where the model allows it): the paper's.
FIRST_CHOSEN = "min_k"
SOURCES = dict(zip(UNLEARN_SOURCE.options, ("Upload or paste", "Demo: demo-wiki paragraphs")))
SHOWN = ["rank", "chunk_id", "ratio", "score_original", "score_unlearned", "n_words", "text"]


def unlearned_default(original: str | None) -> str:
    """The unlearned model offered first: the other built-in for a built-in original, else a name to enter."""
    return {"demo-known": "demo", "demo": "demo-known", None: "demo-known"}.get(original, "other")


def unlearned_ui(original: str | None) -> str | None:
    """The unlearned model's spec: a built-in or a name; re-defaulted whenever the sidebar's model changes."""
    if st.session_state.get("unlearn_for") != original or "unlearn_spec" not in st.session_state:  # its own pair
        st.session_state["unlearn_for"] = original
        st.session_state["unlearn_spec"] = unlearned_default(original)
        st.session_state["unlearn_other"] = ""
    options = list(BUILT_IN)
    choice = st.selectbox("Unlearned model (the sidebar's model is the original)", options,
                          format_func=BUILT_IN.get, key="unlearn_spec")
    if choice != "other":
        return choice
    return st.text_input("Hub id or local folder of the unlearned model", key="unlearn_other").strip() or None


def same_model(a: str, b: str) -> bool:
    """Two specs naming one model: equal, or one local folder written two ways."""
    return a == b or (Path(a).is_dir() and Path(b).is_dir() and Path(a).resolve() == Path(b).resolve())


def texts_ui() -> tuple[list[str], list[str]]:
    """(texts, source names): uploaded documents, pasted text, or demo-wiki paragraphs."""
    source = st.radio("Texts to audit", UNLEARN_SOURCE.options, horizontal=True, key=UNLEARN_SOURCE.key,
                      format_func=SOURCES.get)
    if source == "demo":
        n = st.number_input("Paragraphs per class", 2, 40, 6, key="unlearn_demo_n")
        data = datasets.load("demo-wiki")
        data = data[data["bucket"] == 128].groupby("label").sample(int(n), random_state=0)
        st.caption("With demo-known as the original and demo as the unlearned model the adapter is removed: exact "
                   "unlearning of the members. Members move; non-members, which neither model learned, score alike "
                   "— run the audit only on what should have been forgotten.")
        names = [f"{'member' if lab else 'non-member'}: {i}" for i, lab in zip(data["id"], data["label"])]
        return data["text"].tolist(), names
    uploads = st.file_uploader("Upload documents", type=["txt", "md", "pdf", "epub"], accept_multiple_files=True,
                               help=f"Up to {MAX_UPLOAD_BYTES // 1_000_000} MB each, {MAX_UPLOAD_FILES} files; "
                               f"{MAX_REQUEST_CHARS:,} characters of text in all are scored at once.",
                               key="unlearn_upload")
    texts, names = [], []
    try:
        check_upload_set([upload.size for upload in uploads or []], "This upload")
    except RequestTooLarge as err:
        st.error(str(err))
        uploads = []
    for upload in uploads or []:
        try:
            texts.append(document_text(upload.name, upload.getvalue()))
            names.append(upload.name)
        except DocumentError as err:
            st.error(str(err))
    if texts:
        return texts, names
    text = st.text_area("…or paste a text", height=150, key="unlearn_text", max_chars=MAX_REQUEST_CHARS,
                        placeholder="The text the model was meant to forget (e.g. a book's chapters).")
    return ([text], ["pasted"]) if text.strip() else ([], [])


def params_ui(spec: str | None) -> tuple[UnlearningParams, dict]:
    """Chunk size, the method (one the original model allows, needing only the statistics) with its parameters, and
    the band: (settings, the method's parameters other than k, which the settings carry)."""
    c1, c2, c3, c4 = st.columns(4)
    words = c1.number_input("Words per chunk", int(UNLEARN_WORDS.low), int(UNLEARN_WORDS.high), 512,
                            key=UNLEARN_WORDS.key, help="The paper: 512.")
    method = pick_one_method(spec, AUDITS.methods(), "unlearn_method", c2, first=FIRST_CHOSEN,
                             help="The paper: Min-K% Prob. The ratio needs scores of one sign (Min-K%, loss, zlib).")
    values = param_widgets([method], "unlearn", c3)[method]
    k = values.pop("k", UnlearningParams.k)
    band = c4.number_input("Band", 1.01, 3.0, 1.15, 0.01, key="unlearn_band",
                           help="Suspect when the score ratio lies in (1/band, band); the paper: 1.15.")
    return UnlearningParams(chunk_words=int(words), method=method, k=k, band=band), values


def run(original: str, unlearned: str, texts: list[str], names: list[str], params: UnlearningParams,
        method_params: dict | None = None) -> None:
    """Score every chunk under both models (progress bar); keep the table in the session."""
    try:
        models = cached_model(original), cached_model(unlearned)
    except mia_core.ModelLoadError as err:
        st.error(public_message(str(err)))
        return
    if models[0].fingerprint == models[1].fingerprint:  # one model under two names: every ratio would be 1
        st.warning(f"{original} and {unlearned} are the same model (fingerprint `{models[0].fingerprint}`): the audit "
                   "compares a model with its unlearned version, so it was not run. Pick the unlearned model.")
        return
    bar = st.progress(0.0, text="Scoring chunks under the original, then the unlearned model …")
    try:
        with model_turn("Unlearning audit", 2 * count_tokens(original, tuple(texts))) as check:
            table = audit_unlearning(*models, texts, sources=names, params=params, method_params=method_params,
                                     progress=lambda done, total: (check(done, total),
                                                                   bar.progress(min(1.0, done / total))))
    except ValueError as err:  # e.g. parameters that do not go together
        bar.empty()
        st.error(public_message(str(err)))
        return
    bar.empty()
    st.session_state["unlearn_result"] = {"table": table, "params": params, "models": (original, unlearned),
                                          "method_params": dict(method_params or {})}


def draw(result: dict) -> None:
    """Counts, the scatter with the band, the ranked suspects, the full table as CSV."""
    table, params = result["table"], result["params"]
    name = label(params.method)
    suspects = table[table["suspect"]]
    c1, c2, c3 = st.columns(3)
    c1.metric("Chunks", len(table))
    c2.metric("Suspects", len(suspects))
    c3.metric("Share", f"{len(suspects) / len(table):.0%}")
    others = "".join(f", {n} = {shown(v)}" for n, v in result.get("method_params", {}).items())
    st.caption(f"Original **{result['models'][0]}**, unlearned **{result['models'][1]}**; {name}, k = {params.k:g}"
               f"{others}, {params.chunk_words}-word chunks; suspect when {1 / params.band:.3f} < ratio < "
               f"{params.band:g}. A suspect is a lead for completion or question probes, not proof that unlearning "
               "failed.")
    st.plotly_chart(ratio_figure(table, params.band, name), key="unlearn_scatter")
    st.markdown("**Suspects, most similar under both models first** (|ln ratio| ascending)")
    st.dataframe(suspects[SHOWN], hide_index=True, key="unlearn_table")
    st.download_button("All chunks (CSV)", to_csv_safe(table), "unlearning_audit.csv", "text/csv")


st.title("Unlearning audit")
st.markdown("Chunks of the text that should have been forgotten are scored under the original and the unlearned "
            "model; where the two scores barely differ, unlearning **may have failed** (Shi et al. 2024, §7).")
original = st.session_state.get("model_spec")
unlearned = unlearned_ui(original)
texts, names = texts_ui()
params, method_params = params_ui(original)
same = original is not None and unlearned is not None and same_model(original, unlearned)
tokens = 2 * count_tokens(original, tuple(texts)) if original is not None and texts and not same else 0
if tokens:
    st.caption(estimate_line(tokens // 2, 2, device_type(original)) + " (one pass under each model)")
if original is None:
    st.warning("Load the original model in the sidebar first.")
elif same:
    st.warning(f"The unlearned model is the original ({original}): the audit compares two different models. "
               "Pick the unlearned model above, or another original in the sidebar.")
if st.button("Run the audit", type="primary", disabled=not (original and texts and unlearned) or same,
             key="unlearn_run"):
    try:
        check_request_chars(texts, "These texts")  # both models score every chunk: bounded like one Explore request
        check_request_cost(tokens, device_type(original), "This audit")
        run(original, unlearned, texts, names, params, method_params)
    except RequestTooLarge as err:
        st.error(str(err))
if "unlearn_result" in st.session_state:
    draw(st.session_state["unlearn_result"])

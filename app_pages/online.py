"""Long text, window by window (Min-K%++ appendix C): scores of consecutive token windows along a text.

The one statistics pass waits its turn in the server's line (`ui.model_work`); its tokens are told and bounded
before it runs (`ui.work_estimate`).
"""
from __future__ import annotations

import streamlit as st

import mia_core
from mia_core.audit.online import (
    OnlineParams, demo_passages, join_passages, label_windows, window_auroc, window_scores, window_view,
)
from mia_core.csv_safe import to_csv_safe
from mia_core.heatmap import make_panel, panel_html
from mia_core.inputs.documents import MAX_UPLOAD_BYTES, DocumentError, document_text
from mia_core.limits import MAX_REQUEST_CHARS, RequestTooLarge, check_request_chars, check_request_cost
from ui.model_work import queued
from ui.models import cached_model, cached_stats, pick_one_method
from ui.params import param_widgets
from ui.places import AUDITS, ONLINE_SOURCE
from ui.windows import window_figure
from ui.work_estimate import answer_bytes, count_tokens, device_type, estimate_line

SOURCES = dict(zip(ONLINE_SOURCE.options, ("Paste or upload a text", "Two labelled passages",
                                           "Demo: non-member then member paragraphs (demo-wiki)")))
#: The method chosen on a first visit (where the model allows it): the paper's best online.
FIRST_CHOSEN = "min_k_pp"


def text_ui() -> tuple[str, list[tuple[int, int, int]] | None]:
    """The long text and, where known, the (char_start, char_end, label) span of each passage."""
    source = st.radio("Text", ONLINE_SOURCE.options, format_func=SOURCES.get, horizontal=True, key=ONLINE_SOURCE.key)
    if source == "demo":
        pairs = st.number_input("Pairs of paragraphs", 1, 6, 2, key="online_pairs")
        if st.session_state.get("model_spec") != "demo-known":
            st.info("Membership of the demo paragraphs is known for the **demo-known** model; pick it in the sidebar.")
        passages, labels = demo_passages(int(pairs))
        return join_passages(passages, labels)
    if source == "passages":
        texts, labels = [], []
        for i, column in enumerate(st.columns(2)):
            labels.append(column.radio(f"Passage {i + 1} is", [0, 1], index=i, horizontal=True, key=f"online_label{i}",
                                       format_func=lambda v: "a member" if v else "a non-member"))
            texts.append(column.text_area(f"Passage {i + 1}", height=150, key=f"online_passage{i}",
                                          max_chars=MAX_REQUEST_CHARS // 2))
        if not all(t.strip() for t in texts):
            return "", None
        return join_passages(texts, labels)
    upload = st.file_uploader("Upload a document", type=["txt", "md", "pdf", "epub"], key="online_upload",
                              help=f"Up to {MAX_UPLOAD_BYTES // 1_000_000} MB; {MAX_REQUEST_CHARS:,} characters of "
                              "text are scored at once.")
    if upload is not None:
        try:
            return document_text(upload.name, upload.getvalue()), None
        except DocumentError as err:
            st.error(str(err))
            return "", None
    return st.text_area("Text", height=180, key="online_text", max_chars=MAX_REQUEST_CHARS), None


def params_ui(spec: str | None) -> tuple[OnlineParams, dict]:
    """The window settings and the method (one the model allows, needing only the statistics) with its parameters:
    (settings, the method's parameters other than k, which the settings carry)."""
    c1, c2, c3, c4 = st.columns(4)
    method = pick_one_method(spec, AUDITS.methods(), "online_method", c1, first=FIRST_CHOSEN)
    window = int(c2.number_input("Window (tokens)", 4, 1024, 32, key="online_window", help="The paper: 32."))
    stride = int(c3.number_input("Stride (tokens)", 1, window, window,
                                 help="Tokens between window starts; equal to the window: no overlap (the paper)."))
    values = param_widgets([method], "online", c4)[method]
    k = values.pop("k", OnlineParams.k)
    return OnlineParams(window=window, stride=stride, method=method, k=k), values


def picked_window(n_windows: int) -> int:
    """The window to show: a newly clicked point of the chart (read before it is redrawn), else the number box."""
    event = st.session_state.get("online_chart")
    points = event.get("selection", {}).get("points", []) if event else []
    clicked = next((int(p["customdata"]) for p in points if p.get("customdata") is not None), None)
    if clicked is not None and clicked != st.session_state.get("online_clicked"):
        st.session_state["online_clicked"] = clicked
        st.session_state["online_pick"] = clicked
    if st.session_state.get("online_pick", 0) >= n_windows:
        st.session_state["online_pick"] = 0
    return int(st.number_input("Show window", 0, n_windows - 1, key="online_pick",
                               help="Or click a point of the chart."))


def draw(spec: str, text: str, spans, params: OnlineParams, method_params: dict) -> None:
    """Window scores from cached statistics (changing the method, its parameters or W never re-runs the model)."""
    with st.spinner("Running the model …"):
        stats = queued(lambda: cached_stats(spec, (text,))[0], "Scoring a long text", count_tokens(spec, (text,)))
    if stats.n_scored == 0:
        st.error("Nothing to score: the text is empty.")
        return
    try:
        table = window_scores(stats, params, **method_params)
    except ValueError as err:  # parameters that do not go together (e.g. Tag&Tab's max_words below min_words)
        st.error(str(err))
        return
    labels = label_windows(stats, table, spans) if spans else None
    label = mia_core.METHODS[params.method].label
    cols = st.columns(3)
    cols[0].metric("Tokens", stats.n_scored)
    cols[1].metric("Windows", len(table))
    if labels is not None and len(set(labels[labels >= 0])) == 2:
        cols[2].metric("Window AUROC", f"{window_auroc(table, labels):.3f}")
    context = "at least half a context of" if stats.long_text == "sliding" else "its full"
    st.caption(f"One pass over the whole text: every token is scored with {context} left context "
               f"({cached_model(spec).max_length:,}-token context). Windows take the label of the passage holding "
               "most of their tokens.")
    i = picked_window(len(table))
    st.plotly_chart(window_figure(table, label, labels=labels, picked=i), key="online_chart",
                    on_select="rerun", selection_mode="points")
    row = table.iloc[i]
    tag = "" if labels is None else f" · {['non-member', 'member'][labels[i]] if labels[i] >= 0 else 'no'} passage"
    st.markdown(f"**Window {i}** · tokens {row.token_start}–{row.token_end - 1} · {label} {row.score:.3f}{tag}")
    view = window_view(stats, int(row.token_start), int(row.token_end))
    takes_k = "k" in mia_core.METHODS[params.method].param_names
    score = mia_core.score(params.method, view, **method_params, **({"k": params.k} if takes_k else {}))
    panel = make_panel(params.method, score, scale="fixed")  # its fixed range: windows compare; red = member-like
    st.html(panel_html(view, panel, cached_model(spec).tokenizer.decode, None, element_id="online-window"))
    out = table.assign(label=labels) if labels is not None else table
    st.download_button("Window scores (CSV)", to_csv_safe(out), "windows.csv", "text/csv")


st.title("Long text, window by window")
st.markdown("Detect training data **while it is being generated**: each window of W tokens is scored with the text "
            "before it as context (Zhang et al., Min-K%++, appendix C). Evidence consistent with membership, "
            "never proof.")
spec = st.session_state.get("model_spec")
text, spans = text_ui()
params, method_params = params_ui(spec)
tokens = count_tokens(spec, (text,)) if spec is not None and text.strip() else 0
if tokens:
    st.caption(estimate_line(tokens, 1, device_type(spec), answer_bytes(spec)))
if st.button("Score the windows", type="primary", disabled=spec is None or not text.strip(), key="online_run"):
    try:
        check_request_chars([text], "The text")  # an upload is checked here; the text areas cap themselves
        check_request_cost(tokens, device_type(spec), "Scoring this text")
        st.session_state["online_request"] = (spec, text, spans)
        st.session_state.pop("online_pick", None)
    except RequestTooLarge as err:
        st.error(str(err))
request = st.session_state.get("online_request")
if spec is None:
    st.warning("Load a model in the sidebar first.")
elif request is not None:
    draw(*request, params, method_params)

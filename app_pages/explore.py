"""Explore a text: per-token heatmaps for any token-level method, side by side, redrawn without the model.

Methods that need nothing but the statistics redraw instantly; methods that run the target model
again (more passes) are computed only when asked, and their results are kept for the session.
Methods that compare the text with known texts (helper texts: ReCaLL, Con-ReCall, CAMIA) are offered
once such texts are chosen, and never with the explored text among them. Results are stamped with the model,
text and settings they were computed for, and greyed under a "computed for …" line once the sidebar model, the
text or the BOS policy changes (`ui.stale`); colours are on a fixed scale per method by default (`ui.token_scale`);
the per-token CSV and a standalone heatmap HTML download under the results (`mia_core.token_export`).
"""
from __future__ import annotations

import streamlit as st

import mia_core
from mia_core.limits import RequestTooLarge, check_request_chars
from mia_core.methods import methods_for, stats_only_methods
from mia_core.api import HELPER_NEEDS
from mia_core.stamp import ResultStamp, stamp_for
from ui.explore_text import text_input_ui
from ui.helpers import explore_helpers_ui, helper_inputs, missing_roles, needs_line, takes_shots
from ui.models import cached_model, cached_stats
from ui.reference_view import plain, reference_section, reference_source_ui, resolve_reference
from ui.stale import results_container
from ui.token_scale import reference_texts, scale_ui
from ui.token_views import draw_panels, explore_panel, export_buttons, heatmap_page

#: Methods that need nothing but the target's statistics: switching between them is free.
STATS_ONLY = stats_only_methods()
#: Methods that run the target model again: computed on request (they cost more), kept per session.
EXTRA_PASSES = [name for name in methods_for(("stats", "lm", "lowercase_stats")) if name not in STATS_ONLY]
#: Methods that also need helper texts (known members or non-members): offered once those are chosen.
HELPER_METHODS = [name for name in methods_for(("stats", "lm", "lowercase_stats", *HELPER_NEEDS))
                  if name not in STATS_ONLY + EXTRA_PASSES]


def label_and_cost(method: str) -> str:
    spec = mia_core.METHODS[method]
    return f"{spec.label} ({spec.cost})"


def session_classifier():
    """The GDS classifier fitted on the Benchmark page in this session for the current model, if any."""
    fitted = st.session_state.get("gds_classifier")
    return fitted["classifier"] if fitted and fitted["model"] == st.session_state.get("model_spec") else None


def method_ui(excluded: set[str]) -> tuple[list[str], list[str], float, dict, int]:
    """Up to two statistics-only methods side by side, methods that run the model again, k, the helper texts
    (never a text in `excluded`) and the prefix shots."""
    methods = st.multiselect("Methods (two are shown side by side)", STATS_ONLY, default=["min_k_pp", "min_k"],
                             max_selections=2, format_func=lambda m: mia_core.METHODS[m].label, key="explore_methods")
    helpers = explore_helpers_ui(excluded)
    ready = [m for m in HELPER_METHODS if not missing_roles(m, helpers)]
    offered = EXTRA_PASSES + ready + (["gds"] if session_classifier() is not None else [])
    extra = st.multiselect("Methods that run the model again (computed when you ask: they cost more)", offered,
                           format_func=label_and_cost, key="explore_extra")
    waiting = [m for m in HELPER_METHODS if m not in ready]
    if waiting:
        st.caption("Unavailable until helper texts are chosen: "
                   + "; ".join(needs_line(m, missing_roles(m, helpers)) for m in waiting) + ".")
    if "gds" in offered:
        st.caption(f"GDS uses the classifier fitted on the Benchmark page: {session_classifier().describe()}.")
    else:
        st.caption("GDS is supervised (an MLP learns from labelled texts): fit it on the Benchmark page for this "
                   "model and it appears here.")
    k = st.slider("k: fraction of tokens in the min-k% selection", 0.05, 1.0, 0.2, 0.05, key="explore_k")
    n_shots = int(st.number_input("Prefix shots (n_shots: the first known texts put in front of the text)", 1, 100,
                                  10, 1, key="explore_n_shots")) if takes_shots(extra) else 10
    return methods, extra, k, helpers, n_shots


def method_params(method: str, k: float, n_shots: int = 10) -> dict:
    """k and n_shots where the method takes them; GDS's classifier from this session."""
    names = mia_core.METHODS[method].param_names
    params = {name: value for name, value in (("k", k), ("n_shots", n_shots)) if name in names}
    if "classifier" in mia_core.METHODS[method].needs:
        params["classifier"] = session_classifier()
    return params


def at_k(method: str, result: tuple[float, mia_core.Score], k: float) -> mia_core.Score | None:
    """The stored result redrawn for k without the model when possible (`Score.at_k`); else None."""
    k_then, score = result
    if k_then == k or "k" not in mia_core.METHODS[method].param_names:
        return score
    return score.at_k(k)


def result_key(method: str, helpers: dict, n_shots: int) -> tuple:
    """What a stored result depends on besides the text, model, BOS policy and k: its helper texts and shots."""
    shots = n_shots if "n_shots" in mia_core.METHODS[method].param_names else None
    return method, tuple((role, helpers[role]) for role in missing_roles(method, ())), shots


def extra_pass_results(stats, request: tuple, extra: list[str], k: float, helpers: dict,
                       n_shots: int) -> tuple[dict[str, mia_core.Score], dict[str, str]]:
    """The chosen methods that run the model again, computed on a button press and kept: (scores, errors) of those
    ready."""
    store = st.session_state.get("explore_extra_results")
    if store is None or store["request"] != request:  # a new text, model or BOS policy: start afresh
        store = st.session_state["explore_extra_results"] = {"request": request, "results": {}}
    results = store["results"]
    keys = {m: result_key(m, helpers, n_shots) for m in extra}

    def stored(m: str):  # the error message or the score for this k, else None (to compute)
        found = results.get(keys[m])
        return None if found is None else found[1] if isinstance(found[1], str) else at_k(m, found, k)

    todo = [m for m in extra if stored(m) is None]
    if todo and st.button("Compute " + ", ".join(mia_core.METHODS[m].label for m in todo), key="explore_extra_run",
                          help="Runs the model again: " + "; ".join(label_and_cost(m) for m in todo)):
        lm = cached_model(request[0])
        for method in todo:
            with st.spinner(f"Running {label_and_cost(method)} …"):
                try:
                    inputs = helper_inputs(method, helpers, request[0], request[2])
                    results[keys[method]] = (k, mia_core.score(method, stats, lm=lm, **inputs,
                                                               **method_params(method, k, n_shots)))
                except ValueError as err:
                    results[keys[method]] = (k, str(err))
    elif todo:
        st.caption("Not computed yet: " + "; ".join(label_and_cost(m) for m in todo) + ".")
    ready = {m: stored(m) for m in extra if stored(m) is not None}
    return ({m: v for m, v in ready.items() if not isinstance(v, str)},
            {m: v for m, v in ready.items() if isinstance(v, str)})


def whose(stats, stamp: ResultStamp) -> str:
    """Which text, model and settings the numbers below belong to."""
    return (f"Scores of “{plain(stamp.text_preview)}” ({stats.n_scored} tokens, sha256 `{stamp.short_hash}`) under "
            f"model **{plain(stamp.model)}** (fingerprint `{stamp.fingerprint[:12]}`), BOS policy {stamp.bos}, "
            + ", ".join(f"{name} {value}" for name, value in stamp.settings) + "; higher = more member-like.")


def draw_results(stats, stamp: ResultStamp, request: tuple, methods: list[str], extra: list[str], k: float,
                 helpers: dict, n_shots: int, scale_how: str, reference_choice) -> None:
    """The methods' values and heatmaps side by side (one shared page of tokens), the p-values, the methods that run
    the model again, and the downloads of all that is shown."""
    req_spec, _, req_bos = request
    if stats.long_text != "none":
        what = "scored in sliding windows with at least half a context of left context" \
            if stats.long_text == "sliding" else "truncated to the context"
        st.info(f"The text has {stats.n_text_tokens:,} tokens, more than the model's context: it was {what}.")
    decode = cached_model(req_spec).tokenizer.decode
    st.markdown(whose(stats, stamp))
    page = heatmap_page(stats.n_scored, "explore_heatmap_page")
    reference_tokens = reference_texts(reference_choice)
    panels, errors = [], {}
    for method in methods:
        try:
            params = method_params(method, k)
            panels.append(explore_panel(method, mia_core.score(method, stats, **params), scale_how,
                                        reference_tokens, req_spec, req_bos, params))
        except ValueError as err:  # e.g. Tag&Tab on a text without a word to tag
            errors[method] = str(err)
    draw_panels(stats, panels, decode, page, errors)
    values = {p.method: p.score.value for p in panels}
    reference = resolve_reference(reference_choice, req_spec, methods, k, req_bos) if values else None
    if reference is not None:
        reference_section(reference, stats, values)
    extra_panels = []
    if extra:
        st.subheader("Methods that run the model again")
        scores, extra_errors = extra_pass_results(stats, request, extra, k, helpers, n_shots)
        extra_panels = [explore_panel(m, s, scale_how, None, req_spec, req_bos, {}) for m, s in scores.items()]
        draw_panels(stats, extra_panels, decode, page, extra_errors)
    export_buttons(stats, panels + extra_panels, stamp, decode)
    st.caption(f"{stats.n_scored} tokens scored"
               + (f"; boundary token {stats.boundary_token!r} prepended" if stats.boundary_token else "")
               + ". Hover a token for log p, μ, σ, its rank and the model's top-1 alternative; click it to keep them "
                 "open and copy them.")


st.title("Explore a text")
spec = st.session_state.get("model_spec")
text = text_input_ui()
request = st.session_state.get("explore_request")
methods, extra, k, helpers, n_shots = method_ui({text} | ({request[1]} if request else set()))
bos = st.radio("BOS policy", ["auto", "none"], horizontal=True, key="explore_bos",
               help="auto: prepend the document-boundary token so every token is scored; none: as the reference code.")
scale_how = scale_ui()
reference_choice = reference_source_ui(spec)
if st.button("Score", type="primary", disabled=spec is None or not text.strip()):
    try:
        check_request_chars([text], "The text")  # max_chars binds the browser only; an upload is checked here
        st.session_state["explore_request"] = (spec, text, bos)
        st.session_state["explore_fingerprint"] = cached_model(spec).fingerprint
    except RequestTooLarge as err:
        st.error(str(err))
request = st.session_state.get("explore_request")
if spec is None:
    st.warning("Load a model in the sidebar first.")
if request is not None and (methods or extra):
    shots = {"n_shots": n_shots} if takes_shots(extra) else {}
    stamp = stamp_for(request[0], st.session_state.get("explore_fingerprint", "unknown"), request[1], request[2], k=k,
                      **shots)
    with results_container(stamp, spec, text, bos):
        with st.spinner("Running the model …"):
            stats = cached_stats(request[0], (request[1],), request[2])[0]
        if stats.n_scored == 0:
            st.error("Nothing to score: the text is empty.")
        else:
            draw_results(stats, stamp, request, methods, extra, k, helpers, n_shots, scale_how, reference_choice)

"""Explore a text: per-token heatmaps for any token-level method, side by side, redrawn without the model.

Methods that need nothing but the statistics redraw instantly; methods that run the target model
again (more passes) are computed only when asked, and their results are kept for the session.
Methods that compare the text with known texts (helper texts: ReCaLL, Con-ReCall, CAMIA) are offered
once such texts are chosen, and never with the explored text among them; supervised methods once fitted on the
Benchmark page. The methods listed are those the model's access allows (the others are named with why), with
their parameters drawn from their declarations (`ui.params`). Results are stamped with the model,
text and settings they were computed for, and greyed under a "computed for …" line once the sidebar model, the
text or the BOS policy changes (`ui.stale`); colours are on a fixed scale per method by default (`ui.token_scale`);
the per-token CSV and a standalone heatmap HTML download under the results (`mia_core.token_export`). The model
work waits its turn in the server's line (`ui.model_work`), its cost estimated before it runs and bounded
(`ui.work_estimate`, `mia_core.limits.check_request_cost`). Scoring the same text with another model keeps the
previous model's result beside the new one, each under its stamp (`ui.explore_compare`). Under the scores, the
extraction view (`ui.explore_extraction`) asks whether the model reproduces the text word for word, on request.
"""
from __future__ import annotations

from typing import Any

import streamlit as st

import mia_core
from mia_core.limits import RequestTooLarge, check_request_chars, check_request_cost
from mia_core.stamp import ResultStamp, stamp_for
from ui.explore_compare import Scored, draw_comparison, remember_scored
from ui.explore_extraction import extraction_section
from ui.explore_text import text_input_ui
from ui.helpers import explore_helpers_ui, helper_inputs, missing_roles, needs_line
from ui.model_work import model_turn, queued
from ui.models import FAILED, allowed_methods, cached_model, cached_stats, drop_refused, refused_note
from ui.params import changed, flat, param_widgets
from ui.places import EXPLORE, EXPLORE_BOS, FITTED, SIDE_BY_SIDE, label
from ui.markdown import md
from ui.reference_jobs import pending_reference_ui
from ui.reference_view import PendingReference, reference_section, reference_source_ui, resolve_reference
from ui.stale import results_container
from ui.token_scale import reference_texts, scale_ui
from ui.token_views import draw_panels, explore_panel, export_buttons, heatmap_page
from ui.work_estimate import answer_bytes, count_tokens, device_type, estimate_line, request_passes

#: The statistics-only methods shown first (where the model allows them).
FIRST_SHOWN = ("min_k_pp", "min_k")


def label_and_cost(method: str) -> str:
    spec = mia_core.METHODS[method]
    return f"{spec.label} ({spec.cost})"


def session_fits() -> dict[str, Any]:
    """The supervised methods fitted on the Benchmark page in this session for the current model: method → its fit."""
    fitted = st.session_state.get(FITTED)
    return dict(fitted["methods"]) if fitted and fitted["model"] == st.session_state.get("model_spec") else {}


def method_ui(spec: str | None, excluded: set[str]) -> tuple[list[str], list[str], dict, dict]:
    """Up to two statistics-only methods side by side, methods that run the model again (those that need helper texts
    once chosen, never a text in `excluded`; supervised ones once fitted), and the chosen methods' parameters; the
    methods this model does not allow are named with why."""
    offered = allowed_methods(spec, EXPLORE.methods())
    stats_only = [m for m in offered.allowed if mia_core.METHODS[m].stats_only]
    drop_refused("explore_methods", stats_only)
    methods = st.multiselect("Methods (two are shown side by side)", stats_only,
                             default=[m for m in FIRST_SHOWN if m in stats_only], max_selections=SIDE_BY_SIDE,
                             format_func=label, key="explore_methods")
    helpers = explore_helpers_ui(excluded)
    fits = session_fits()
    others = [m for m in offered.allowed if m not in stats_only]
    supervised = [m for m in others if mia_core.METHODS[m].supervised is not None]
    with_helpers = [m for m in others if missing_roles(m, ()) and m not in supervised]
    passes = [m for m in others if m not in supervised + with_helpers]
    ready = passes + [m for m in with_helpers if not missing_roles(m, helpers)] + [m for m in supervised if m in fits]
    drop_refused("explore_extra", ready)
    extra = st.multiselect("Methods that run the model again (computed when you ask: they cost more)", ready,
                           format_func=label_and_cost, key="explore_extra")
    waiting = [m for m in with_helpers if missing_roles(m, helpers)]
    if waiting:
        st.caption("Unavailable until helper texts are chosen: "
                   + "; ".join(needs_line(m, missing_roles(m, helpers)) for m in waiting) + ".")
    for method in supervised:
        if method in fits:
            st.caption(f"{label(method)} uses its fit from the Benchmark page: {fits[method].describe()}.")
        else:
            st.caption(f"{label(method)} learns from labelled texts: fit it on the Benchmark page for this model and "
                       "it appears here.")
    refused_note(offered.refused)
    return methods, extra, param_widgets(methods + extra, "explore"), helpers


def method_inputs(method: str, values: dict, fits: dict[str, Any]) -> dict:
    """A method's parameters as drawn, and a supervised method's fit from this session (as the need it meets)."""
    spec = mia_core.METHODS[method]
    inputs = dict(values.get(method, {}))
    if spec.supervised is not None:
        inputs[spec.supervised.fits] = fits.get(method)
    return inputs


def at_k(method: str, result: tuple[float | None, mia_core.Score], k: float | None) -> mia_core.Score | None:
    """The stored result redrawn for k without the model when possible (`Score.at_k`); else None."""
    k_then, score = result
    if k_then == k or "k" not in mia_core.METHODS[method].param_names:
        return score
    return score.at_k(k)


def result_key(method: str, helpers: dict, params: dict) -> tuple:
    """What a stored result depends on besides the text, model and BOS policy: its helper texts and its parameters
    other than k (a new k is redrawn from the stored token scores)."""
    return (method, tuple((role, helpers[role]) for role in missing_roles(method, ())),
            tuple((name, value) for name, value in params.items() if name != "k"))


def extra_pass_results(stats, request: tuple, extra: list[str], values: dict,
                       helpers: dict) -> tuple[dict[str, mia_core.Score], dict[str, str]]:
    """The chosen methods that run the model again, computed on a button press and kept: (scores, errors) of those
    ready."""
    store = st.session_state.get("explore_extra_results")
    if store is None or store["request"] != request:  # a new text, model or BOS policy: start afresh
        store = st.session_state["explore_extra_results"] = {"request": request, "results": {}}
    results = store["results"]
    keys = {m: result_key(m, helpers, values[m]) for m in extra}

    def stored(m: str):  # the error message or the score for this k, else None (to compute)
        found = results.get(keys[m])
        return None if found is None else found[1] if isinstance(found[1], str) else \
            at_k(m, found, values[m].get("k"))

    todo = [m for m in extra if stored(m) is None]
    tokens, more = stats.n_text_tokens + 1, request_passes(todo, values) - 1  # the statistics pass is done
    cost = tokens * more
    if todo and more:
        st.caption(estimate_line(tokens, more, device_type(request[0]), answer_bytes(request[0])))
    if todo and st.button("Compute " + ", ".join(mia_core.METHODS[m].label for m in todo), key="explore_extra_run",
                          help="Runs the model again: " + "; ".join(label_and_cost(m) for m in todo)):
        try:
            check_request_cost(cost, device_type(request[0]), "Computing these methods")
            run_extra(stats, request, todo, values, helpers, results, keys, cost)
        except RequestTooLarge as err:
            st.error(str(err))
    elif todo:
        st.caption("Not computed yet: " + "; ".join(label_and_cost(m) for m in todo) + ".")
    ready = {m: stored(m) for m in extra if stored(m) is not None}
    return ({m: v for m, v in ready.items() if not isinstance(v, str)},
            {m: v for m, v in ready.items() if isinstance(v, str)})


def run_extra(stats, request: tuple, todo: list[str], values: dict, helpers: dict, results: dict, keys: dict,
              cost: int) -> None:
    """The methods that run the model again, in this request's turn in the server's line; each result (or error)
    kept under its key."""
    lm = cached_model(request[0])
    fits = session_fits()
    with model_turn("Methods that run the model again", cost):
        for method in todo:
            with st.spinner(f"Running {label_and_cost(method)} …"):
                try:
                    inputs = helper_inputs(method, helpers, request[0], request[2])
                    results[keys[method]] = (values[method].get("k"), mia_core.score(
                        method, stats, lm=lm, **inputs, **method_inputs(method, values, fits)))
                except ValueError as err:
                    results[keys[method]] = (values[method].get("k"), str(err))


def request_estimate(spec: str | None, text: str, bos: str, methods: list[str], values: dict) -> tuple[int, int]:
    """(tokens, passes) a Score of this text with these methods would cost (none without a model or text); shown
    under the button with the bound it is held to."""
    if spec is None or not text.strip() or spec in st.session_state.get(FAILED, {}):
        return 0, 0
    try:
        tokens, passes = count_tokens(spec, (text,), bos), request_passes(methods, values)
    except mia_core.ModelLoadError:
        return 0, 0
    st.caption(estimate_line(tokens, passes, device_type(spec), answer_bytes(spec)))
    return tokens, passes


def whose(stats, stamp: ResultStamp) -> str:
    """Which text, model and settings the numbers below belong to."""
    return (f"Scores of “{md(stamp.text_preview)}” ({stats.n_scored} tokens, sha256 `{stamp.short_hash}`) under "
            f"model **{md(stamp.model)}** (fingerprint `{stamp.fingerprint[:12]}`), BOS policy {stamp.bos}, "
            + ", ".join(f"{name} {value}" for name, value in stamp.settings) + "; higher = more member-like.")


def draw_results(stats, stamp: ResultStamp, request: tuple, methods: list[str], extra: list[str], values: dict,
                 helpers: dict, scale_how: str, reference_choice) -> None:
    """The methods' values and heatmaps side by side (one shared page of tokens), the p-values, the methods that run
    the model again, and the downloads of all that is shown."""
    req_spec, _, req_bos = request
    if stats.long_text != "none":
        what = "scored in sliding windows with at least half a context of left context" \
            if stats.long_text == "sliding" else "truncated to the context"
        st.info(f"The text has {stats.n_text_tokens:,} tokens, more than the model's context: it was {what}.")
    decode = cached_model(req_spec).tokenizer.decode
    page = heatmap_page(stats.n_scored, "explore_heatmap_page")
    reference_tokens = reference_texts(reference_choice)
    compared = draw_comparison(Scored(req_spec, stamp.fingerprint, request[1], req_bos), stats, methods, values,
                               scale_how, reference_tokens, page)
    st.markdown(whose(stats, stamp))
    pvalue_place = st.container()  # where the p-value's progress shows while its known non-members are scored
    panels, errors = [], {}
    for method in methods:
        try:
            params = values[method]
            panels.append(explore_panel(method, mia_core.score(method, stats, **params), scale_how,
                                        reference_tokens, req_spec, req_bos, params))
        except ValueError as err:  # e.g. Tag&Tab on a text without a word to tag
            errors[method] = str(err)
    if compared:  # this model's heatmaps are in the comparison's right-hand column: not drawn a second time
        with st.expander("This model's scores again, with what they mean and the tokens behind them"):
            draw_panels(stats, panels, decode, page, errors)
    else:
        draw_panels(stats, panels, decode, page, errors)
    scores = {p.method: p.score.value for p in panels}
    shown = {m: values[m] for m in scores}
    others = {n: v for n, v in changed(shown).items() if n != "k"}  # a reference built with the same parameters
    reference = resolve_reference(reference_choice, req_spec, methods, flat(shown).get("k"), req_bos, others) \
        if scores else None
    if isinstance(reference, PendingReference):
        with pvalue_place:
            pending_reference_ui(reference.key, reference.what)
    elif reference is not None:
        reference_section(reference, stats, scores)
    extra_panels = []
    if extra:
        st.subheader("Methods that run the model again")
        extra_scores, extra_errors = extra_pass_results(stats, request, extra, values, helpers)
        extra_panels = [explore_panel(m, s, scale_how, None, req_spec, req_bos, {}) for m, s in extra_scores.items()]
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
methods, extra, values, helpers = method_ui(spec, {text} | ({request[1]} if request else set()))
bos = st.radio("BOS policy", EXPLORE_BOS.options, horizontal=True, key=EXPLORE_BOS.key,
               help="auto: prepend the document-boundary token so every token is scored; none: as the reference code.")
scale_how = scale_ui()
reference_choice = reference_source_ui(spec)
tokens, passes = request_estimate(spec, text, bos, methods + extra, values)
if st.button("Score", type="primary", disabled=spec is None or not text.strip()):
    try:
        check_request_chars([text], "The text")  # max_chars binds the browser only; an upload is checked here
        check_request_cost(tokens * passes, device_type(spec), "Scoring this text with these methods")
        old = st.session_state.get("explore_request")
        scored = Scored(spec, cached_model(spec).fingerprint, text, bos)
        remember_scored(None if old is None else Scored(old[0], st.session_state.get("explore_fingerprint", "unknown"),
                                                        *old[1:]), scored)
        st.session_state["explore_request"] = (spec, text, bos)
        st.session_state["explore_fingerprint"] = scored.fingerprint
    except RequestTooLarge as err:
        st.error(str(err))
request = st.session_state.get("explore_request")
if spec is None:
    st.warning("Load a model in the sidebar first.")
if request is not None and (methods or extra):
    stamp = stamp_for(request[0], st.session_state.get("explore_fingerprint", "unknown"), request[1], request[2],
                      **flat(values))
    with results_container(stamp, spec, text, bos):
        with st.spinner("Running the model …"):
            stats = queued(lambda: cached_stats(request[0], (request[1],), request[2])[0], "Scoring a text",
                           count_tokens(request[0], (request[1],), request[2]))
        if stats.n_scored == 0:
            st.error("Nothing to score: the text is empty.")
        else:
            draw_results(stats, stamp, request, methods, extra, values, helpers, scale_how, reference_choice)
extraction_section(None if spec in st.session_state.get(FAILED, {}) else spec, text, bos)  # never a failed model

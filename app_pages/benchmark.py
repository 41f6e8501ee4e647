"""Benchmark methods on labelled texts: ROC curves, metrics with intervals, the blind baseline; every run is kept in
the session, so runs (e.g. `demo` and then `demo-known` on the same texts) can be overlaid and compared.

The methods offered are those the page can supply and the model's access allows (the others are named with why);
their parameters are drawn from their declarations (`ui.params`). A supervised method (one that learns from
labelled texts) is fitted on a seeded stratified share of the texts, and every method is then evaluated on the
same held-out rest. Methods that need helper texts (known members or non-members) get them split off the labelled
set, or from uploaded files; those texts are scored by no method. A run waits its turn in the server's line
(`ui.model_work`); its cost (the texts' tokens × the methods' passes) is told and bounded before it runs.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import streamlit as st

import mia_core
from mia_core.evaluation import FitSplit, evaluate_methods, reproduce_command
from mia_core.inputs.benchmarks import BENCHMARKS
from mia_core.limits import RequestTooLarge, check_request_cost
from mia_core.methods import NEEDS
from mia_core.reference import TextsProgress
from ui.bench_data import data_ui
from ui.bench_runs import compare_ui, download_name, keep_run, metrics_json, scores_csv
from ui.bench_tables import blind_note, blind_table, column_config, metrics_table, shown, unresolved_note
from ui.charts import bucket_table, distribution_figure, method_label, roc_figure
from ui.helpers import BenchmarkHelpers, benchmark_helpers_ui, helpers_note
from ui.jobs import public_message
from ui.markdown import md
from ui.model_work import model_turn
from ui.models import allowed_methods, cached_model, drop_refused, refused_note, short_model
from ui.params import changed, param_widgets
from ui.places import BENCHMARK, FITTED, label
from ui.work_estimate import answer_bytes, count_tokens, device_type, estimate_line, request_passes

#: The methods chosen on a first visit (where the model allows them).
FIRST_CHOSEN = ("loss", "zlib", "min_k", "min_k_pp")
#: Parameters drawn only once asked for: by default each method keeps its own k (SURP's differs).
ASKED = ("k",)


def supervised(methods: list[str]) -> list[str]:
    """The chosen methods that learn from labelled texts."""
    return [m for m in methods if mia_core.METHODS[m].supervised is not None]


def methods_ui(spec: str | None) -> tuple[list[str], dict]:
    """The methods, each with what it needs from the model and what it costs, and their parameters; those this page
    cannot supply and those the model does not allow are named with why."""
    offered = allowed_methods(spec, BENCHMARK.methods())
    drop_refused("bench_methods", offered.allowed)
    methods = st.multiselect("Methods", offered.allowed, default=[m for m in FIRST_CHOSEN if m in offered.allowed],
                             key="bench_methods", format_func=label)
    specs = [mia_core.METHODS[m] for m in methods]
    if specs:
        st.markdown("\n".join(f"- **{s.label}** — access: {', '.join(s.access_words())}; cost: {s.cost}" for s in specs))
    elsewhere = [m for m in mia_core.METHODS if not BENCHMARK.offers(mia_core.METHODS[m])]
    if elsewhere:
        st.caption("Not offered here (run them with `mia eval`): " + "; ".join(map(unmet_needs, elsewhere)) + ".")
    refused_note(offered.refused)
    return methods, param_widgets(methods, "bench", ask=ASKED)


def unmet_needs(method: str) -> str:
    """"DC-PDD, which needs a token-frequency table …": what the page cannot supply to a method."""
    words = [NEEDS[n].split(" (`")[0] for n in mia_core.METHODS[method].needs if n not in BENCHMARK.supplies]
    return f"{mia_core.METHODS[method].label}, which needs {' and '.join(words)}"


def fit_ui(methods: list[str]) -> FitSplit | None:
    """With a supervised method chosen: the seeded stratified share of the texts it learns from."""
    learners = supervised(methods)
    if not learners:
        return None
    names = " and ".join(label(m) for m in learners)
    c1, c2 = st.columns(2)
    fraction = c1.slider("Training share of the supervised methods (stratified)", 0.1, 0.9, 0.3, 0.05,
                         key="bench_fit_fraction", help=f"The share of the labelled texts {names} learn from, members "
                         "and non-members alike; every method is evaluated on the rest.")
    seed = c2.number_input("Training split seed", 0, 1_000_000, 0, 1, key="bench_fit_seed")
    one = len(learners) == 1
    st.caption(f"{names} {'learns' if one else 'learn'} from labelled texts: with {'it' if one else 'them'} chosen, "
               "every method is evaluated on the held-out texts only.")
    return FitSplit(float(fraction), int(seed))


def run(spec: str, name: str, data: pd.DataFrame, methods: list[str], values: dict, fit: FitSplit | None = None,
        per_class: int | None = None, helpers: BenchmarkHelpers | None = None) -> None:
    """Score and evaluate through the core's one evaluation path (`evaluate_methods`); keep the result in the session.

    `values` are the drawn parameters (a run is given those that differ from a method's own default, and k when asked
    for). With `fit`, the supervised methods chosen are fitted on a seeded stratified split and all methods are
    evaluated on the rest; `helpers` gives the helper texts (files) or how to split them off `data` (then no method
    scores them).
    """
    helpers = helpers or BenchmarkHelpers()
    params = changed(values, keep=ASKED)
    k = params.pop("k", None)
    lm = cached_model(spec)
    data = data.reset_index(drop=True)
    cost = count_tokens(spec, tuple(data["text"])) * request_passes(methods, values)
    try:
        check_request_cost(cost, lm.device.type, "This run")
    except RequestTooLarge as err:
        st.error(str(err))
        return
    what = f"Scoring {md(name)} under {md(short_model(spec))}"
    bar = st.progress(0.0, text=f"{what}: waiting for the model …")

    def show(progress: TextsProgress) -> None:
        bar.progress(min(1.0, progress.done / max(progress.total, 1)), text=f"{what}: {progress.words()}")
    try:
        with warnings.catch_warnings(), model_turn("Benchmark run", cost) as check:
            warnings.simplefilter("ignore")
            result = evaluate_methods(lm, data, methods, k=k, fit=fit, n_boot=1000, seed=0, source=name,
                                      params=params, inputs=helpers.inputs, helper_split=helpers.split,
                                      progress=check, on_texts=show)
    except ValueError as err:  # e.g. too few labelled texts for the training or the helper split, a helper text scored
        bar.empty()
        message = public_message(str(err))
        learners = ", ".join(label(m) for m in supervised(methods))
        st.error(f"{learners}: {message}" if fit is not None and not helpers.roles else message)
        return
    bar.empty()
    if result.fitted:
        st.session_state[FITTED] = {"model": spec, "methods": dict(result.fitted)}  # Explore offers them
    keep = result.held_out
    data = helpers.scored(data)  # the helper texts split off were scored by no method
    evaluated = result.report["run"]["methods"]
    columns = st.session_state.get("bench_columns", {})
    st.session_state["bench_result"] = keep_run({
        "name": name, "model": spec, "data": data[keep].reset_index(drop=True),
        "scores": result.scores.loc[keep, evaluated].reset_index(drop=True),
        "all_scores": pd.concat([data, result.scores.drop(columns=["id", "label"])], axis=1),
        "report": result.report, "k": k, "fit_split": result.report.get("split"), "per_class": per_class,
        "columns": columns,
        "command": reproduce_command(result.report["run"], input_name=name, per_class=per_class, **columns)})


def fit_note(split: dict, methods: list[str]) -> str:
    """What the supervised methods learned from, and that everything shown is on the held-out part."""
    learners = supervised(methods)
    names = " and ".join(label(m) for m in learners) or "The supervised methods"
    return (f"**{names} {'is' if len(learners) == 1 else 'are'} supervised.** {'It' if len(learners) == 1 else 'They'} "
            f"learned from {split['n_train']} texts ({split['train_members']} members, "
            f"{split['train_nonmembers']} non-members) = a {split['train_fraction']:.0%} stratified split with "
            f"seed {split['seed']}. Every metric here is on the other {split['n_test']} held-out texts "
            f"({split['test_members']} members, {split['test_nonmembers']} non-members), for every method.")


def draw(result: dict) -> None:
    """ROC, metrics read column by column, the blind baseline and its uncertainty, distributions, length buckets,
    the comparison of kept runs, downloads."""
    data, scores, report = result["data"], result["scores"], result["report"]
    labels = data["label"].to_numpy()
    methods = list(scores.columns)
    st.subheader(f"{result['name']}: {report['n_members']} members, {report['n_nonmembers']} non-members, scored by "
                 f"{short_model(result['model'])}")
    st.caption(f"Run {result['label']}; every number below belongs to it. Earlier runs stay below, to compare.")
    if result.get("fit_split"):
        st.info(fit_note(result["fit_split"], methods))
    if report.get("helpers"):
        st.info(helpers_note(report["helpers"]))
    for warning in report["warnings"]:
        st.warning(f"⚠ {warning}")
    log_scale = st.toggle("log-log axes (low false-positive regime)", key="bench_log")
    st.plotly_chart(roc_figure(labels, scores, log_scale=log_scale), key="bench_roc")
    st.dataframe(shown(metrics_table(report, methods)), hide_index=True, key="bench_metrics", column_config=column_config())
    st.caption("Hover a column header for how to read it. AUROC above blind: the method's AUROC minus the best "
               "model-free attack's on the same texts (minus 0.5 when that attack is below chance); near 0 or below, "
               "the texts alone explain the labels.")
    if note := unresolved_note(report):
        st.caption(note)
    level, line = blind_note(report)
    {"warning": st.warning, "info": st.info, "caption": st.caption}[level](line)
    st.dataframe(shown(blind_table(report)), hide_index=True, key="bench_blind")
    for note in sorted({w for m in methods for w in report[m]["warnings"] if "not resolvable" not in w}):
        st.caption(note)
    method = st.selectbox("Score distribution of", methods, key="bench_dist", format_func=method_label)
    st.plotly_chart(distribution_figure(labels, scores[method].to_numpy(), method), key="bench_hist")
    st.markdown("**AUROC by text length (words)**")
    st.dataframe(shown(bucket_table(labels, scores, data["text"].tolist())), hide_index=True, key="bench_buckets")
    compare_ui(log_scale)
    st.markdown("**Download** — every text with its scores, and the metrics with the model, its fingerprint, the "
                "data, k, seeds and methods, and the command that repeats them:")
    c1, c2 = st.columns(2)
    c1.download_button("Per-sample scores (CSV)", scores_csv(result), download_name(result, "scores", ".csv"),
                       "text/csv", key="bench_dl_scores")
    c2.download_button("Metrics and settings (JSON)", metrics_json(result), download_name(result, "metrics", ".json"),
                       "application/json", key="bench_dl_metrics")
    st.code(result["command"], language="bash", wrap_lines=True)
    if result["name"] in BENCHMARKS:
        st.caption(f"{result['name']} came from the hub: save its rows as a CSV (text, label) and pass that file "
                   "as --input to reproduce these numbers.")
    else:
        st.caption("Run it in a terminal to reproduce these numbers (an uploaded file: use its path on your machine).")


st.title("Benchmark methods")
spec = st.session_state.get("model_spec")
name, data, per_class = data_ui()
methods, values = methods_ui(spec)
helpers = benchmark_helpers_ui(methods, values)
fit = fit_ui(methods)
ready = spec is not None and data is not None and len(data) > 0 and bool(methods) and helpers.ready
if spec is None:
    st.warning("Load a model in the sidebar first.")
elif data is not None and len(np.unique(data["label"])) < 2:
    st.error("The data needs both members (1) and non-members (0).")
else:
    if ready:
        st.caption(estimate_line(count_tokens(spec, tuple(data["text"])), request_passes(methods, values),
                                 device_type(spec), answer_bytes(spec)))
    if st.button("Run", type="primary", disabled=not ready, key="bench_run"):
        run(spec, name, data, methods, values, fit, per_class, helpers)
if "bench_result" in st.session_state:
    draw(st.session_state["bench_result"])

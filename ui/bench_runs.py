"""Benchmark runs kept in the session and compared: every run is labelled "model · data · n · k" and kept (the last
MAX_RUNS), several can be overlaid on one ROC figure, set side by side in one table (AUROC with its interval) and
tested in pairs (`ui.bench_pairs`). Also the run's downloads:
the metrics JSON (model, fingerprint, dataset, k, seed, methods, the reproducing command) and the scores CSV."""
from __future__ import annotations

import json

import streamlit as st

from mia_core.csv_safe import to_csv_safe
from mia_core.names import file_name
from ui.bench_pairs import pairs_ui
from ui.bench_tables import METRIC_KEYS, RATES, blind_interval, compare_table, shown, unresolved_note
from ui.charts import method_label, runs_roc_figure
from ui.models import short_model

#: Runs kept per session (the oldest is dropped first): each holds its texts and scores.
MAX_RUNS = 10
#: Session-state keys: the kept runs and the counter that numbers them.
RUNS_KEY, COUNTER_KEY = "bench_runs", "bench_run_counter"


def run_label(number: int, result: dict) -> str:
    """"#2 demo-known · demo-wiki · n 120 · k 0.2": which model scored which texts, how many, with which k."""
    report = result["report"]
    n = report["n_members"] + report["n_nonmembers"]
    k = "k per method" if result["k"] is None else f"k {result['k']:g}"
    return f"#{number} {short_model(result['model'])} · {result['name']} · n {n:,} · {k}"


def download_name(result: dict, what: str, suffix: str) -> str:
    """"run2_demo-known_demo-wiki_2026-11-26_scores.csv": a download named by its run (number, model, texts, day), so
    two runs' files neither overwrite nor get mixed up; only letters, digits, `.`, `_` and `-`."""
    day = str(result["report"]["run"].get("created", ""))[:10]
    return file_name(f"run{result.get('number', 0)}", short_model(result["model"]), result["name"], day, what,
                     suffix=suffix)


def keep_run(result: dict) -> dict:
    """Number, label and keep a finished run (the newest last, at most MAX_RUNS); returns it labelled."""
    number = st.session_state.get(COUNTER_KEY, 0) + 1
    st.session_state[COUNTER_KEY] = number
    result = {**result, "number": number, "label": run_label(number, result)}
    st.session_state[RUNS_KEY] = [*st.session_state.get(RUNS_KEY, []), result][-MAX_RUNS:]
    st.session_state.pop("bench_compare", None)  # the comparison starts again from the two newest runs
    return result


def compare_ui(log_scale: bool) -> None:
    """Choose kept runs; overlay their ROC curves, set their metrics side by side, test them in pairs."""
    runs = st.session_state.get(RUNS_KEY, [])
    st.markdown(f"**Compare runs** — this session keeps your last {MAX_RUNS} runs (a reload forgets them).")
    if len(runs) < 2:
        st.caption("Run again to compare: e.g. score these texts with `demo`, switch the sidebar model to "
                   "`demo-known` (which was trained on the members), run again, and see the curves move apart.")
        return
    by_number = {r["number"]: r for r in runs}
    default = [r["number"] for r in runs[-2:]]
    chosen = st.multiselect("Runs to compare", list(by_number), default=default, key="bench_compare",
                            format_func=lambda n: by_number[n]["label"])
    chosen = [by_number[n] for n in chosen if n in by_number]
    if not chosen:
        return
    curves = [(r["label"], r["data"]["label"].to_numpy(), r["scores"]) for r in chosen]
    st.plotly_chart(runs_roc_figure(curves, log_scale=log_scale), key="bench_compare_roc")
    st.caption("One colour per run, one line style per method. Runs on the same texts with different models show "
               "what the model knows; the same model on different texts shows how the data matters.")
    column = st.selectbox("Metric side by side", list(METRIC_KEYS), key="bench_compare_metric")
    table = compare_table(chosen, column)
    runs = [c for c in table.columns if c != "method"] if column in RATES else []  # percentages; blank, not "None"
    st.dataframe(shown(table, runs), hide_index=True, key="bench_compare_table")
    if column == "AUROC":
        st.caption("AUROC [95% CI]: each method's bootstrap interval from its run's own table; the blind baseline's "
                   "is Hanley–McNeil.")
    for r in chosen:  # why a run's column is blank (too few non-members for this FPR), run by run
        if column in RATES and (note := unresolved_note(r["report"], only=column)):
            st.caption(f"{r['label']}: {note}")
    pairs_ui(chosen)


def metrics_json(result: dict) -> str:
    """The downloaded metrics: the report, its run block with the dataset, method labels and the reproducing command."""
    report, run = result["report"], result["report"]["run"]
    dataset = {"name": result["name"], "n_texts": report["n_members"] + report["n_nonmembers"],
               "n_members": report["n_members"], "n_nonmembers": report["n_nonmembers"],
               "per_class": result.get("per_class"), **result.get("columns", {})}
    labels = {m: method_label(m) for m in run["methods"]}
    run = {**run, "method_labels": labels, "dataset": dataset, "command": result["command"]}
    return json.dumps({**report, "blind_baseline_ci": blind_interval(report), "run": run}, indent=2)


def scores_csv(result: dict) -> str:
    """Every scored text with its id, label, text and each method's score (spreadsheet-safe)."""
    return to_csv_safe(result["all_scores"])

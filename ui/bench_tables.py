"""The Benchmark page's tables: metrics by method label with a "how to read this" line per column, TPR cells left
blank where too few non-members make them unresolvable, the blind attacks, the blind baseline's interval with a
warning that grows as the sample shrinks, and several runs side by side (AUROC with its 95% interval).

One number format on every table of the page: AUROCs and their differences to three decimals, rates (TPR, FPR) as
percentages with one decimal."""
from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
import streamlit as st

from mia_core.metrics import auroc_interval
from ui.charts import method_label

#: Column → report key of a method's metrics.
METRIC_KEYS = {"AUROC": "auroc", "TPR@5%FPR": "tpr@5%fpr", "TPR@1%FPR": "tpr@1%fpr", "TPR@0.1%FPR": "tpr@0.1%fpr",
               "FPR@95%TPR": "fpr@95%tpr", "AUROC above blind": "auroc_above_blind"}
#: TPR column → its false-positive rate.
TPR_RATES = {"TPR@5%FPR": 0.05, "TPR@1%FPR": 0.01, "TPR@0.1%FPR": 0.001}
#: Columns holding rates, shown as percentages.
RATES = (*TPR_RATES, "FPR@95%TPR")
#: How to read each column (the help shown on its header).
HELP = {
    "method": "The membership-inference method; every score is oriented so that higher = more member-like.",
    "AUROC": "The chance that a random member scores above a random non-member: 0.5 = no signal, 1 = perfect.",
    "95% CI": "95% bootstrap interval of the AUROC (resampling these texts): where it could fall on other texts "
              "like these. A wide interval means too few texts.",
    "FPR@95%TPR": "Share of non-members wrongly flagged when the threshold catches 95% of the members "
                  "(lower = better).",
    "AUROC [95% CI]": "Each run's AUROC and its 95% interval: the bootstrap interval of the run's own metrics table; "
                      "for the blind baseline, the Hanley–McNeil interval (it keeps no per-text scores).",
    "AUROC above blind": "This AUROC minus the best model-free (blind) attack's on the same texts, or minus 0.5 when "
                         "that attack is below chance: near 0 or below, the text alone (topic, date, style) explains "
                         "the labels, not the model.",
}
#: Blind-baseline interval half-widths above which the page warns (first) or notes (second) the uncertainty.
UNCERTAIN, IMPRECISE = 0.10, 0.05


def needed(rate: float) -> int:
    """Non-members needed before one false positive is at most `rate` (20 for 5%, 100 for 1%, 1,000 for 0.1%)."""
    return math.ceil(1.0 / rate - 1e-9)


def tpr_help(column: str) -> str:
    """How to read a TPR@x%FPR column, and when it stays blank."""
    pct = column.removeprefix("TPR@").removesuffix("FPR")
    return (f"Share of members caught when the threshold lets only {pct} of non-members through (the low-FPR regime an "
            f"audit relies on). Blank: needs ≥ {needed(TPR_RATES[column]):,} non-members.")


def _value(report: dict, method: str, column: str):
    """A method's metric, or None (a blank cell) when undefined or not resolvable with this many non-members."""
    if column in TPR_RATES and report["n_nonmembers"] < needed(TPR_RATES[column]):
        return None
    value = report[method].get(METRIC_KEYS[column])
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def metrics_table(report: dict, methods: Sequence[str]) -> pd.DataFrame:
    """One row per method (its label): AUROC, CI, TPR at 5/1/0.1% FPR, FPR at 95% TPR, AUROC above blind."""
    rows = []
    for m in methods:
        lo, hi = report[m]["auroc_ci"]
        ci = "" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"
        row = {"method": method_label(m), "AUROC": _value(report, m, "AUROC"), "95% CI": ci}
        row.update({c: _value(report, m, c) for c in list(METRIC_KEYS)[1:]})
        rows.append(row)
    return pd.DataFrame(rows, columns=["method", "AUROC", "95% CI", *list(METRIC_KEYS)[1:]])


def column_config() -> dict:
    """`st.dataframe` column settings: the reading of each metric on its header, AUROCs to three decimals; the rate
    columns as percentage text (`shown`), since a number column draws a missing value as "None" whatever the
    table's format."""
    config = {"method": st.column_config.TextColumn("method", help=HELP["method"]),
              "95% CI": st.column_config.TextColumn("95% CI", help=HELP["95% CI"])}
    for column in METRIC_KEYS:
        config[column] = (st.column_config.TextColumn(column, help=tpr_help(column) if column in TPR_RATES
                                                      else HELP[column], alignment="right")
                          if column in RATES
                          else st.column_config.NumberColumn(column, help=HELP[column], format="%.3f"))
    return config


def as_percent(values: pd.Series) -> pd.Series:
    """Rates as percentages with one decimal ("34.5%"), a missing one blank: what a rate cell shows."""
    return values.map(lambda v: "" if v is None or pd.isna(v) else f"{v:.1%}").astype(object)


def shown(table: pd.DataFrame, rate_columns: Sequence[str] | None = None):
    """The table as drawn: numbers to three decimals; `rate_columns` (default: the rate columns present) as
    percentage text, so an unresolvable cell is blank, not "None"."""
    columns = [c for c in table.columns if c in RATES] if rate_columns is None else list(rate_columns)
    table = table.assign(**{c: as_percent(table[c]) for c in columns})
    return table.style.format(precision=3, na_rep="")


def with_interval(auroc: float | None, interval: Sequence[float | None] | None) -> str:
    """"0.734 [0.650, 0.810]": an AUROC and its 95% interval to three decimals; blank when undefined."""
    if auroc is None or (isinstance(auroc, float) and math.isnan(auroc)):
        return ""
    lo, hi = interval if interval is not None else (None, None)
    return f"{auroc:.3f}" if lo is None or hi is None else f"{auroc:.3f} [{lo:.3f}, {hi:.3f}]"


def unresolved_note(report: dict, only: str | None = None) -> str | None:
    """Why TPR cells are blank ("this run has 60 non-members; TPR@1%FPR needs ≥ 100 …"), or None when none is;
    `only`: for that column alone."""
    n = report["n_nonmembers"]
    blank = [f"{c} needs ≥ {needed(r):,}" for c, r in TPR_RATES.items() if n < needed(r) and only in (None, c)]
    if not blank:
        return None
    needs = blank[0] if len(blank) == 1 else ", ".join(blank[:-1]) + " and " + blank[-1]
    return (f"Blank TPR cells: this run has {n:,} non-members; {needs} (with fewer, a single false "
            "positive is already above that rate, so no threshold reaches it).")


def blind_table(report: dict) -> pd.DataFrame:
    """Every blind attack (no model) with its AUROC; the best one is "the blind baseline"."""
    blind = report["blind_baseline"]
    return pd.DataFrame([{"blind attack (no model)": attack, "AUROC": a["auroc"], "uses": a["method"],
                          "": "the blind baseline (best)" if attack == blind.get("best") else ""}
                         for attack, a in blind.get("attacks", {}).items()])


def blind_interval(report: dict) -> list[float | None]:
    """The blind baseline's 95% interval on this run's members and non-members."""
    return auroc_interval(report["blind_baseline"].get("auroc"), report["n_members"], report["n_nonmembers"])


def blind_note(report: dict) -> tuple[str, str]:
    """(level, text): the blind baseline with its interval; "warning" when the interval is wide (few texts),
    "info" when it is moderate, "caption" when it is narrow."""
    blind, (n1, n0) = report["blind_baseline"], (report["n_members"], report["n_nonmembers"])
    lo, hi = blind_interval(report)
    if blind.get("auroc") is None or lo is None or hi is None:
        return "warning", f"No blind baseline on these texts: {blind.get('reason') or 'every blind attack failed'}."
    line = (f"Blind baseline (best model-free attack, {blind['best']}): AUROC {blind['auroc']:.3f}, 95% CI "
            f"[{lo:.3f}, {hi:.3f}] (Hanley–McNeil, {n1:,} members and {n0:,} non-members).")
    half = (hi - lo) / 2
    if half > UNCERTAIN:
        return "warning", (f"{line} With this few texts the blind baseline itself is uncertain (± {half:.2f}): an "
                           f"'AUROC above blind' smaller than that is not a difference. Use more texts per class.")
    if half > IMPRECISE:
        return "info", f"{line} Known to about ± {half:.2f}: read small 'AUROC above blind' values with care."
    return "caption", line


def compare_table(runs: Sequence[dict], column: str) -> pd.DataFrame:
    """Several kept runs side by side: one row per method label, one column per run (its label), values of `column`
    (blank where a run lacks the method or cannot resolve it). AUROC is text with its 95% interval ("0.734 [0.650,
    0.810]", the run's own bootstrap interval) and adds the blind baseline's row (its Hanley–McNeil interval)."""
    methods = list(dict.fromkeys(m for r in runs for m in r["scores"].columns))
    table = pd.DataFrame({"method": [method_label(m) for m in methods]})
    for r in runs:
        report = r["report"]
        table[r["label"]] = ([with_interval(_value(report, m, column), report[m]["auroc_ci"]) if m in report else ""
                              for m in methods] if column == "AUROC" else
                             [_value(report, m, column) if m in report else None for m in methods])
    if column == "AUROC":
        blind = {r["label"]: with_interval(r["report"]["blind_baseline"]["auroc"], blind_interval(r["report"]))
                 for r in runs}
        blind["method"] = "blind baseline (no model)"
        table = pd.concat([table, pd.DataFrame([blind])], ignore_index=True)
    return table

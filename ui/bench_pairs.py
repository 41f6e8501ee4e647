"""Paired tests between the kept runs compared side by side: for each pair of runs, what texts they share and, per
method both ran, ΔAUROC with DeLong's test and a paired bootstrap (`mia_core.run_pairing`), as text to cite."""
from __future__ import annotations

from itertools import combinations
from typing import Sequence

import pandas as pd
import streamlit as st

from mia_core.names import shown_name
from mia_core.run_pairing import RunPair, compare_runs, delta_sentence, shared_sentence
from ui.charts import method_label


@st.cache_data(show_spinner="Paired tests (DeLong, paired bootstrap) …", max_entries=64)
def paired_result(first: str, data_a: pd.DataFrame, scores_a: pd.DataFrame, second: str, data_b: pd.DataFrame,
                  scores_b: pd.DataFrame, n_boot: int, seed: int) -> RunPair:
    """`compare_runs`, kept per pair of runs: the page reruns on every click, the bootstrap need not."""
    return compare_runs(first, data_a, scores_a, second, data_b, scores_b, n_boot=n_boot, seed=seed)


def run_pairs(runs: Sequence[dict]) -> list[tuple[dict, dict, RunPair]]:
    """Every pair of the runs (earlier, later by number) compared on their shared texts; ΔAUROC = later − earlier.
    The bootstrap takes the earlier run's resamples and seed."""
    ordered = sorted(runs, key=lambda r: r["number"])
    found = []
    for early, late in combinations(ordered, 2):
        block = early["report"]["run"]
        n_boot, seed = int(block.get("n_boot", 1000)), int(block.get("seed", 0))
        found.append((early, late, paired_result(
            f"#{early['number']}", early["data"][["text", "label"]], early["scores"], f"#{late['number']}",
            late["data"][["text", "label"]], late["scores"], n_boot, seed)))
    return found


def pair_text(early: dict, late: dict, pair: RunPair) -> str:
    """The runs by their labels, what they share, and each method's paired result: plain text to copy and cite."""
    lines = [shown_name(early["label"]), shown_name(late["label"]), shared_sentence(pair)]
    lines += [delta_sentence(pair, m, method_label(m.method)) for m in pair.methods]
    return "\n".join(lines)


def pairs_ui(runs: Sequence[dict]) -> None:
    """The paired tests of the chosen runs, one copyable block per pair."""
    if len(runs) < 2:
        return
    st.markdown("**Paired tests** — two runs on the same texts, method by method")
    st.caption("ΔAUROC = the later run's AUROC minus the earlier one's, on the texts both scored (matched by their "
               "content). In brackets: DeLong's 95% interval; p: DeLong's two-sided test (DeLong et al. 1988, "
               "correlated AUROCs); then the percentile interval of a paired bootstrap (the same resampled texts for "
               "both runs). Copy a block to cite it.")
    for early, late, pair in run_pairs(runs):
        st.code(pair_text(early, late, pair), language=None, wrap_lines=True)

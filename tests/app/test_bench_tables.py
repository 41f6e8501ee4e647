"""The Benchmark page's table helpers (no app run): the blind baseline's interval against the exact null variance of
the Mann–Whitney AUROC and against a simulation, blank TPR cells, the warning level by sample size, run labels,
the side-by-side table (AUROC with its interval, rates as percentages) and the page's wording of input errors."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, rankdata

from mia_core import METHODS
from mia_core.inputs.tables import InputError
from ui.bench_data import default_index, page_error
from ui.bench_runs import run_label
from mia_core.metrics import auroc_interval
from mia_core.run_pairing import compare_runs
from ui.bench_pairs import pair_text
from ui.bench_tables import blind_note, compare_table, metrics_table, shown, unresolved_note


def method_report(auroc: float, tpr: float = 0.3) -> dict:
    """One method's metrics as `metrics.evaluate` (through json_safe) reports them."""
    return {"auroc": auroc, "auroc_ci": [auroc - 0.1, auroc + 0.1], "tpr@5%fpr": tpr, "tpr@1%fpr": tpr / 2,
            "tpr@0.1%fpr": tpr / 4, "fpr@95%tpr": 0.7, "auroc_above_blind": auroc - 0.5, "warnings": []}


def report(n_members: int, n_nonmembers: int, blind_auroc: float | None = 0.5, **methods: float) -> dict:
    return {**{m: method_report(a) for m, a in methods.items()}, "n_members": n_members, "n_nonmembers": n_nonmembers,
            "blind_baseline": {"auroc": blind_auroc, "best": "bow_trees", "attacks": {}}, "warnings": []}


@pytest.mark.parametrize(("n1", "n0"), [(6, 6), (30, 50), (500, 400)])
def test_interval_at_chance_is_the_exact_mann_whitney_null_variance(n1, n0):
    """At AUROC 0.5 the Hanley–McNeil variance equals the exact null variance (n1 + n0 + 1) / (12 n1 n0)."""
    lo, hi = auroc_interval(0.5, n1, n0)
    half = 1.959963984540054 * math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))
    assert (lo, hi) == pytest.approx((max(0.0, 0.5 - half), 0.5 + half), abs=1e-12)


def test_interval_covers_the_spread_of_simulated_aurocs():
    """Binormal scores with a known AUROC Φ(d/√2) = 0.75: the interval's half-width is within 10% of 1.96 × the
    standard deviation of 4,000 simulated empirical AUROCs, and covers the true value about 95% of the time."""
    rng = np.random.default_rng(0)
    n1 = n0 = 40
    d = math.sqrt(2) * norm.ppf(0.75)
    pos, neg = rng.normal(d, 1, (4000, n1)), rng.normal(0, 1, (4000, n0))
    ranks = rankdata(np.hstack([pos, neg]), axis=1)[:, :n1].sum(axis=1)
    aurocs = (ranks - n1 * (n1 + 1) / 2) / (n1 * n0)
    lo, hi = auroc_interval(0.75, n1, n0)
    assert (hi - lo) / 2 == pytest.approx(1.96 * aurocs.std(), rel=0.10)
    covered = np.mean([a - (h - l) / 2 <= 0.75 <= a + (h - l) / 2
                       for a in aurocs[:500] for l, h in [auroc_interval(a, n1, n0)]])
    assert 0.92 <= covered <= 0.98


def test_interval_is_undefined_without_a_baseline():
    assert auroc_interval(None, 5, 5) == [None, None] and auroc_interval(float("nan"), 5, 5) == [None, None]


def test_tpr_cells_blank_below_the_non_members_they_need():
    """150 non-members resolve 5% (needs 20) and 1% (needs 100), not 0.1% (needs 1,000)."""
    rep = report(150, 150, loss=0.7, min_k=0.6)
    table = metrics_table(rep, ["loss", "min_k"])
    assert list(table["method"]) == [METHODS["loss"].label, METHODS["min_k"].label]
    assert table["TPR@5%FPR"].tolist() == [0.3, 0.3] and table["TPR@1%FPR"].tolist() == [0.15, 0.15]
    assert table["TPR@0.1%FPR"].isna().all() and table["95% CI"].tolist() == ["[0.600, 0.800]", "[0.500, 0.700]"]
    assert unresolved_note(rep) == ("Blank TPR cells: this run has 150 non-members; TPR@0.1%FPR needs ≥ 1,000 (with "
                                    "fewer, a single false positive is already above that rate, so no threshold "
                                    "reaches it).")
    assert unresolved_note(report(1000, 1000, loss=0.7)) is None
    assert "has 19 non-members; TPR@5%FPR needs ≥ 20, TPR@1%FPR needs ≥ 100 and TPR@0.1%FPR needs ≥ 1,000 (" in \
        unresolved_note(report(20, 19, loss=0.7))
    assert metrics_table(report(20, 19, loss=0.7), ["loss"])["TPR@5%FPR"].isna().all()  # 19 < 20


@pytest.mark.parametrize(("n", "level", "phrase"), [(6, "warning", "the blind baseline itself is uncertain"),
                                                    (150, "info", "Known to about ± 0.07"),
                                                    (1000, "caption", "Hanley–McNeil, 1,000 members")])
def test_blind_note_grows_stronger_as_the_sample_shrinks(n, level, phrase):
    """Half-widths at AUROC 0.5: 0.34 (6 per class), 0.065 (150), 0.025 (1,000) against the 0.10 / 0.05 limits."""
    got_level, text = blind_note(report(n, n, loss=0.7))
    assert got_level == level and phrase in text
    half = 1.96 * math.sqrt((2 * n + 1) / (12 * n * n))
    assert f"[{max(0, 0.5 - half):.3f}, {0.5 + half:.3f}]" in text


def test_blind_note_without_a_baseline_says_why():
    rep = report(1, 1, blind_auroc=None, loss=0.7)
    rep["blind_baseline"]["reason"] = "blind baseline needs ≥ 2 samples per class, got 1"
    assert blind_note(rep) == ("warning", "No blind baseline on these texts: blind baseline needs ≥ 2 samples per "
                                          "class, got 1.")


def test_compare_table_sets_runs_side_by_side():
    runs = [{"label": "#1 demo · demo-wiki · n 40 · k 0.2", "scores": pd.DataFrame(columns=["loss", "min_k"]),
             "report": report(20, 20, 0.55, loss=0.52, min_k=0.51)},
            {"label": "#2 demo-known · demo-wiki · n 240 · k 0.2", "scores": pd.DataFrame(columns=["loss"]),
             "report": report(120, 120, 0.5, loss=0.74)}]
    auroc = compare_table(runs, "AUROC")
    assert auroc["method"].tolist() == [METHODS["loss"].label, METHODS["min_k"].label, "blind baseline (no model)"]
    a, n = 0.55, 20  # the blind baseline's Hanley–McNeil interval, written out
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    half = 1.959963984540054 * math.sqrt((a * (1 - a) + (n - 1) * (q1 - a * a) + (n - 1) * (q2 - a * a)) / (n * n))
    assert auroc[runs[0]["label"]].tolist() == ["0.520 [0.420, 0.620]", "0.510 [0.410, 0.610]",
                                                f"0.550 [{a - half:.3f}, {a + half:.3f}]"]
    assert auroc[runs[1]["label"]].tolist()[:2] == ["0.740 [0.640, 0.840]", ""]  # run 2 has no Min-K%
    tpr = compare_table(runs, "TPR@1%FPR")  # 20 non-members cannot resolve 1%; 120 can
    assert pd.isna(tpr[runs[0]["label"]][0]) and tpr[runs[1]["label"]][0] == 0.15 and len(tpr) == 2
    drawn = shown(tpr, [r["label"] for r in runs]).data  # rates as percentages, an unresolvable one blank
    assert drawn[runs[0]["label"]].tolist() == ["", ""] and drawn[runs[1]["label"]].tolist() == ["15.0%", ""]


def test_run_label_names_model_data_size_and_k():
    result = {"model": "/srv/models/tiny", "name": "mine.csv", "k": None, "report": report(600, 700)}
    assert run_label(3, result) == "#3 tiny · mine.csv · n 1,300 · k per method"
    assert run_label(4, {**result, "model": "EleutherAI/pythia-160m", "k": 0.25}) == \
        "#4 EleutherAI/pythia-160m · mine.csv · n 1,300 · k 0.25"


def test_input_errors_are_worded_for_the_page():
    err = InputError("/tmp/tmpab12/mine.csv has no label column 'label' (columns: 'a', 'b'); "
                     "choose one with --label-column")
    assert page_error(err) == ("mine.csv has no label column 'label' (columns: 'a', 'b'); pick the label column in "
                               "the menu above")
    assert default_index(["passage", "text", "label"], "text") == 1
    assert default_index(["passage", "y"], "label", avoid="passage") == 1 and default_index(["only"], "label") == 0


def test_a_pair_block_names_both_runs_with_hidden_characters_escaped():
    """An uploaded file named with a right-to-left override would reorder the block: it is written as its escape."""
    rng = np.random.default_rng(0)
    data = pd.DataFrame({"text": [f"t{i}" for i in range(24)], "label": [1, 0] * 12})
    a, b = pd.DataFrame({"loss": rng.normal(size=24)}), pd.DataFrame({"loss": rng.normal(size=24)})
    early = {"label": "#1 demo · \u202eevil.csv · n 24 · k per method"}
    late = {"label": "#2 demo-known · \u202eevil.csv · n 24 · k per method"}
    lines = pair_text(early, late, compare_runs("#1", data, a, "#2", data, b, n_boot=100)).splitlines()
    assert lines[:2] == ["#1 demo · \\u202eevil.csv · n 24 · k per method",
                         "#2 demo-known · \\u202eevil.csv · n 24 · k per method"]
    assert lines[3].startswith(f"{METHODS['loss'].label}: ΔAUROC (#2 − #1) = ") and len(lines) == 4

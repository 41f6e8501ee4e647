"""Probe on the held-out rows of the every-method table (docs/performance.md): `python bench/probe_heldout.py demo-known` (or `demo`).

The rows `mia eval --per-class 100 --n-shots 10 --reference-fraction 0.3 --helper-seed 0 --fit 0.3` leaves for
the side-by-side table: demo-wiki, 100 texts per class (seeded), the helper texts split off with seed 0 (10
non-member and 10 member shots, 30% of the non-members left as CAMIA's reference), then a stratified 30% fit split
(seed 0) whose 18 non-members are Probe's known non-members; metrics on the 105 held-out rows (63 + 42). `loss` is
scored beside it to show the rows are the table's (it reproduces its row).
"""
from __future__ import annotations

import json
import sys

from mia_core import datasets, load_model
from mia_core.evaluation import evaluate_methods
from mia_core.fitting import FitSplit
from mia_core.methods.helper_texts import HelperSplit, split_helpers
from mia_core.methods.labelled import check_labels


def main(model: str) -> dict:
    """AUROC with its 95% interval and TPR@1%FPR of loss and probe on the held-out rows, and the probe's fit."""
    data = datasets.sample_per_class(datasets.load("demo-wiki"), 100)
    rows = split_helpers(check_labels(data["label"].to_numpy()), ["shots_nonmembers", "shots_members", "reference"],
                         HelperSplit(n_shots=10, reference_fraction=0.3, seed=0))
    scored = data.iloc[rows["scored"]].reset_index(drop=True)
    result = evaluate_methods(load_model(model), scored, ["loss", "probe"], fit=FitSplit(0.3, 0), source="demo-wiki",
                              seed=0)
    out = {m: {k: result.report[m][k] for k in ("auroc", "auroc_ci", "tpr@1%fpr")} for m in ("loss", "probe")}
    spec = result.fitted["probe"].spec
    out["probe_fit"] = {k: spec[k] for k in ("layer", "dev_auc", "aux", "settings")}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "demo-known"), indent=1))

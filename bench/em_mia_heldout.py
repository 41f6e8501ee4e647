"""EM-MIA on the held-out rows of the every-method table (docs/performance.md): `python bench/em_mia_heldout.py demo-known [K]` (or `demo`).

The rows `mia eval --per-class 100 --n-shots 10 --reference-fraction 0.3 --helper-seed 0 --fit 0.3` leaves for
the side-by-side table (the helper split, then the held-out 70% of a stratified 30% fit split, seed 0): 63 members
and 42 non-members. EM-MIA scores them as one set (it is transductive), each text judged as a prefix on a seeded
sample of K of them (`sample_size=K`, `sample_seed=0`; 105·K conditional passes instead of 105²). `loss` is scored
beside it to show the rows are the table's (it reproduces its row).
"""
from __future__ import annotations

import json
import sys
import warnings

from mia_core import datasets, load_model, metrics, score_texts
from mia_core.methods.helper_texts import HelperSplit, split_helpers
from mia_core.methods.labelled import check_labels, stratified_split


def main(model: str, sample_size: int) -> dict:
    """AUROC with its 95% interval and TPR@1%FPR of loss and em_mia on the held-out rows."""
    data = datasets.sample_per_class(datasets.load("demo-wiki"), 100)
    rows = split_helpers(check_labels(data["label"].to_numpy()), ["shots_nonmembers", "shots_members", "reference"],
                         HelperSplit(n_shots=10, reference_fraction=0.3, seed=0))
    scored = data.iloc[rows["scored"]].reset_index(drop=True)
    _, held = stratified_split(check_labels(scored["label"].to_numpy()), train_fraction=0.3, seed=0)
    texts, labels = scored["text"].iloc[held].tolist(), scored["label"].to_numpy()[held]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        frame = score_texts(load_model(model), texts, ["loss", "em_mia"], sample_size=sample_size, sample_seed=0)
    out = {}
    for method in ("loss", "em_mia"):
        report = metrics.evaluate(labels, frame[method].to_numpy(), n_boot=1000, seed=0)
        out[method] = {k: report[k] for k in ("auroc", "auroc_ci", "tpr@1%fpr")}
    out["rows"] = {"members": int(labels.sum()), "nonmembers": int((labels == 0).sum()), "sample_size": sample_size}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] if len(sys.argv) > 1 else "demo-known",
                          int(sys.argv[2]) if len(sys.argv) > 2 else 20), indent=1))

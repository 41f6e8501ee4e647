"""N-gram coverage on the held-out rows of the every-method table (docs/performance.md): `python bench/ngram_heldout.py demo-known [NAME=VALUE …]`
(method parameters, e.g. `n_samples=5 max_new_tokens=32`; the method's defaults otherwise).

The rows `mia eval --per-class 100 --n-shots 10 --reference-fraction 0.3 --helper-seed 0 --fit 0.3` leaves for
the side-by-side table: demo-wiki, 100 texts per class (seeded), the helper texts split off with seed 0 (10
non-member and 10 member shots, 30% of the non-members left as CAMIA's reference), then the stratified 30% fit
split (seed 0) held out as GDS's training rows; only the 105 rows left (63 members, 42 non-members) are scored, so
no generation is spent on rows the table does not evaluate. `loss` is scored beside it to show the rows are the
table's (it reproduces its row). Prints the metrics, the parameters and the wall time of the run; progress goes to
stderr. Generation is slow on a loaded CPU: run it with `OMP_NUM_THREADS=1` there (under a load of 10 on 2 cores,
two torch threads sampled 10 times slower than one).
"""
from __future__ import annotations

import json
import sys
import time

import pandas as pd

from mia_core import datasets, load_model, score_texts
from mia_core.evaluation import evaluate_frame
from mia_core.methods.helper_texts import HelperSplit, split_helpers
from mia_core.methods.labelled import check_labels, stratified_split


def held_out_rows():
    """The 105 rows the every-method table evaluates (id, text, label)."""
    data = datasets.sample_per_class(datasets.load("demo-wiki"), 100)
    rows = split_helpers(check_labels(data["label"].to_numpy()), ["shots_nonmembers", "shots_members", "reference"],
                         HelperSplit(n_shots=10, reference_fraction=0.3, seed=0))
    scored = data.iloc[rows["scored"]].reset_index(drop=True)
    _, test = stratified_split(check_labels(scored["label"].to_numpy()), train_fraction=0.3, seed=0)
    return scored.iloc[test].reset_index(drop=True)


def main(model: str, params: dict, *, chunk: int = 15) -> dict:
    """AUROC with its 95% interval and TPR@1%FPR of loss and ngram_coverage (with `params`) on the held-out rows.

    Scored `chunk` texts at a time (the scores do not depend on batching), with progress on stderr, then evaluated as
    `mia eval` does (`evaluate_frame`: 1,000 bootstrap resamples, seed 0)."""
    rows = held_out_rows()
    lm, start, parts = load_model(model), time.perf_counter(), []
    for at in range(0, len(rows), chunk):
        parts.append(score_texts(lm, list(rows["text"][at:at + chunk]), ["loss", "ngram_coverage"], **params))
        print(f"{min(at + chunk, len(rows))}/{len(rows)} texts, {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)
    scores = pd.concat(parts, ignore_index=True)[["loss", "ngram_coverage"]]
    labels = rows["label"].to_numpy()
    report = evaluate_frame(scores, labels, list(rows["text"]), n_boot=1000, seed=0)
    out = {m: {k: report[m][k] for k in ("auroc", "auroc_ci", "tpr@1%fpr")} for m in ("loss", "ngram_coverage")}
    values = scores["ngram_coverage"].to_numpy()
    out["rows"] = {"members": int(labels.sum()), "nonmembers": int((1 - labels).sum()), "params": params,
                   "mean_members": float(values[labels == 1].mean()),
                   "mean_nonmembers": float(values[labels == 0].mean()),
                   "zero_scores": int((values == 0).sum()), "seconds": round(time.perf_counter() - start, 1)}
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    given = dict(a.split("=", 1) for a in args[1:])
    print(json.dumps(main(args[0] if args else "demo-known", {k: int(v) for k, v in given.items()}), indent=1))

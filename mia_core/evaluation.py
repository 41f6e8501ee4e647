"""Method comparison on labelled texts, end to end: scores, held-out rows, metrics, the blind baseline, a run block.

`evaluate_methods` is the one path behind `mia eval` and the Benchmark page: it scores every text, fits the
chosen supervised methods on a seeded split (`fitting.FitSplit`) and holds their training rows out for every
method, evaluates,
and records seeds, settings, model fingerprint and code version in a run block (`reproduce_command`
turns that block back into the `mia eval` command). The blind baseline (Das, Zhang & Tramèr 2024)
tells whether the labels are separable without the model at all; if so, a high AUROC is not
evidence of membership.
"""
from __future__ import annotations

import datetime
import math
import shlex
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from . import blind, metrics
from .api import HELPER_NEEDS, get_method
from .fitting import FitSplit, fit_supervised, given_fit
from .methods.helper_texts import HelperSplit, HelperTexts, ReferenceStats, split_helpers
from .methods.labelled import check_labels
from .model.language_model import LanguageModel
from .reference.progress import TextsClock, TextsProgress
from .scoring import score_table
from .version import code_version


def evaluate_frame(scores: pd.DataFrame, labels, texts, *, n_boot: int = 1000, seed: int = 0) -> dict:
    """`{method: metrics.evaluate(...) + "auroc_above_blind", "blind_baseline": {...}, "n_members", "n_nonmembers",
    "warnings"}`: every method against every blind attack (`blind.blind_baseline`) on the same rows."""
    labels = np.asarray(labels)
    with warnings.catch_warnings():  # every warning is kept in the report instead
        warnings.simplefilter("ignore", UserWarning)
        report: dict = {n: metrics.evaluate(labels, scores[n].to_numpy(), n_boot=n_boot, seed=seed) for n in scores}
        baseline = blind.blind_baseline(list(texts), labels, seed=seed)
    for n in scores:  # how far a method gets beyond what the text alone explains (NaN when either is undefined)
        report[n]["auroc_above_blind"] = above_blind(report[n]["auroc"], baseline["auroc"])
    report["blind_baseline"] = baseline
    report["n_members"] = int((labels == 1).sum())
    report["n_nonmembers"] = int((labels == 0).sum())
    report["warnings"] = blind.blind_warnings(baseline, {n: report[n]["auroc"] for n in scores})
    return report


def above_blind(auroc: float, blind_auroc: float) -> float:
    """AUROC − max(blind baseline, 0.5): what the model adds beyond the text alone, and never beyond chance. A blind
    baseline below chance (0.375 on some splits) is luck, not a lower bar: against it a chance-level method would
    show +0.125. NaN when either is undefined."""
    if math.isnan(auroc) or math.isnan(blind_auroc):
        return math.nan
    return auroc - max(blind_auroc, 0.5)


def format_report(report: dict, methods: list[str]) -> str:
    """A plain-text table of the report for the terminal (undefined values, null in JSON, print as nan)."""
    lines = [f"{'method':10s} {'AUROC':>6s} {'95% CI':>15s} {'TPR@5%':>7s} {'TPR@1%':>7s} {'FPR@95%TPR':>10s} "
             f"{'above blind':>11s}"]
    for name in methods:
        m = {"auroc_above_blind": math.nan, **{key: _nan_for_null(value) for key, value in report[name].items()}}
        lo, hi = (_nan_for_null(v) for v in m["auroc_ci"])
        lines.append(f"{name:10s} {m['auroc']:6.3f} [{lo:5.3f}, {hi:5.3f}] {m['tpr@5%fpr']:7.3f} "
                     f"{m['tpr@1%fpr']:7.3f} {m['fpr@95%tpr']:10.3f} {m['auroc_above_blind']:+11.3f}")
    baseline = report["blind_baseline"]
    why = baseline.get("reason") or "the best of the model-free attacks below"
    lines.append(f"{'blind':10s} {_nan_for_null(baseline['auroc']):6.3f}   ({why})")
    lines += blind.attack_lines(baseline)
    lines.append(f"members: {report['n_members']}, non-members: {report['n_nonmembers']}")
    notes = report["warnings"] + sorted({w for n in methods for w in report[n]["warnings"]})
    lines += [f"warning: {w}" for w in notes]
    return "\n".join(lines)


@dataclass
class EvaluationRun:
    """A finished evaluation: the JSON-safe report (with its "run" block) and the per-text scores.

    scores : id, label, n_tokens, long_text, one column per method (every text; `in_training_split`
        marks rows that no metric uses because a supervised method learned from them).
    held_out : bool per text, True where the metrics were computed.
    fitted : what each supervised method fitted here (with `fit=`), by method.
    """

    report: dict
    scores: pd.DataFrame
    held_out: np.ndarray
    fitted: dict[str, Any] = field(default_factory=dict)


def _with_clock(progress: Callable[[int, int], None] | None, clock: TextsClock | None
                ) -> Callable[[int, int], None] | None:
    """The model pass's (tokens fed, all tokens) callback, also telling `clock` the pace (for the time left)."""
    if clock is None:
        return progress

    def fed(done: int, total: int) -> None:
        if progress is not None:
            progress(done, total)
        clock.tokens_fed(done, total)
    return fed


def evaluate_methods(lm: LanguageModel, data: pd.DataFrame, methods: Sequence[str], *, k: float | None = None,
                     bos: str = "auto", long_text: str = "sliding", params: dict | None = None,
                     inputs: dict | None = None, fit: FitSplit | None = None, n_boot: int = 1000, seed: int = 0,
                     source: str = "", backend: str = "local", ray_address: str | None = None, ray_options: Any = None,
                     progress: Callable[[int, int], None] | None = None,
                     helper_split: HelperSplit | None = None,
                     on_texts: Callable[[TextsProgress], None] | None = None) -> EvaluationRun:
    """Score labelled texts (`data`: id, text, label) with `methods` and evaluate them on the held-out rows.

    params : method parameters (e.g. {"m": 5}); inputs : what methods need (`ref_model`, `freq`, a supervised
    method's fitted value such as `classifier` — fitted elsewhere: the texts it learned from are held out; helper
    texts `shots_nonmembers`, `shots_members`, `reference` as `HelperTexts` or lists of texts).
    fit : fit the chosen supervised methods here on one seeded split; every method is then evaluated on the rest.
    helper_split : how helper texts a method needs but `inputs` lacks are split off `data` (default
        `HelperSplit(n_shots=params["n_shots"] or 10)`); those rows are then scored by no method.
    progress : called as progress(tokens fed, all tokens) by the model pass. on_texts : called with a `TextsProgress`
        (texts whose statistics are back, of all, and the time left) as batches finish.
    """
    methods, params, inputs = list(dict.fromkeys(methods)), dict(params or {}), dict(inputs or {})
    unused = set(params) - {n for m in methods for n in get_method(m).param_names}
    if unused:
        raise TypeError(f"parameters {sorted(unused)} are not used by methods {methods}")
    data, helpers_record = _split_off_helpers(data, methods, params, inputs, helper_split, source)
    fitting = [m for m in methods if fit is not None and get_method(m).supervised is not None]
    scored = [m for m in methods if m not in fitting]  # a method fitted here scores itself
    texts, labels = [str(t) for t in data["text"]], check_labels(data["label"].to_numpy())
    ids = data["id"].tolist() if "id" in data else list(range(len(texts)))
    where = {"backend": backend, "ray_address": ray_address, "ray_options": ray_options}
    frame = pd.DataFrame({"id": ids, "label": labels})
    clock = TextsClock(len(texts), on_texts) if on_texts is not None else None
    if clock is not None:  # "0 of 480 texts" as the pass starts: its first batch may take a while on a CPU
        on_texts(clock.progress())
    progress = _with_clock(progress, clock)
    if scored:
        frame = pd.concat([frame, score_table(lm, texts, scored, k=k, bos=bos, long_text=long_text, progress=progress,
                                              texts_done=clock.texts_ready if clock else None,
                                              **where, **_params_of(scored, params), **inputs)], axis=1)
    held_out, fitted, extra = np.ones(len(texts), dtype=bool), {}, {}
    for method in fitting:
        found = fit_supervised(lm, method, texts, labels, ids=ids, split=fit, params=_params_of([method], params),
                               bos=bos, source=source, progress=progress, score_all=True)
        fitted[method] = found.value
        held_out[found.train_idx] = False
        frame[method] = found.scores  # every row's score (training rows are marked and not evaluated)
        extra = {"split": {k: v for k, v in found.record.items() if k not in ("train_ids", "train_sha256")},
                 "supervised": {m: v.describe() for m, v in fitted.items()}}
    for method in scored:  # fitted elsewhere: the texts it learned from are no evidence
        given = given_fit(method, inputs)
        if given is not None:
            held_out &= np.array([not given.trained_on(t) for t in texts], dtype=bool)
    if not held_out.all():
        frame["in_training_split"] = ~held_out
    evaluated = scored + fitting
    report = evaluate_frame(frame.loc[held_out, evaluated].reset_index(drop=True), labels[held_out],
                            [t for t, keep in zip(texts, held_out) if keep], n_boot=n_boot, seed=seed)
    report.update(extra)
    if helpers_record:
        report["helpers"] = helpers_record
    report["run"] = run_block(lm, fitted, methods=evaluated, k=k, bos=bos, long_text=long_text, params=params,
                              inputs=inputs, fit=fit, n_boot=n_boot, seed=seed, source=source, backend=backend,
                              excluded=int((~held_out).sum()), n_texts=len(texts), helpers=helpers_record)
    return EvaluationRun(json_safe(report), frame, held_out, fitted)


def _params_of(methods: list[str], params: dict) -> dict:
    """The parameters some of `methods` take."""
    names = {n for m in methods for n in get_method(m).param_names}
    return {n: v for n, v in params.items() if n in names}


def _split_off_helpers(data: pd.DataFrame, methods: list[str], params: dict, inputs: dict,
                       split: HelperSplit | None, source: str) -> tuple[pd.DataFrame, dict]:
    """(the rows to score, the helper record): helper texts the methods need but `inputs` lacks come off `data`."""
    needed = [r for r in HELPER_NEEDS if any(r in get_method(m).needs for m in methods)]
    missing = [r for r in needed if inputs.get(r) is None]
    record: dict = {}
    if missing:
        split = split or HelperSplit(n_shots=int(params.get("n_shots", HelperSplit.n_shots)))
        rows = split_helpers(check_labels(data["label"].to_numpy()), missing, split)
        texts = [str(t) for t in data["text"]]
        ids = data["id"].tolist() if "id" in data else list(range(len(texts)))
        for role in missing:
            inputs[role] = HelperTexts(tuple(texts[i] for i in rows[role]), role,
                                       source=f"split off {source or 'the input'} (seed {split.seed})")
            record[role] = {**inputs[role].describe(), "ids": [_plain_id(ids[i]) for i in rows[role]]}
        record["split"] = asdict(split)
        data = data.iloc[rows["scored"]].reset_index(drop=True)
    for role in (r for r in needed if r not in missing):
        given = inputs[role]
        record[role] = (given.helpers if isinstance(given, ReferenceStats) else
                        given if isinstance(given, HelperTexts) else HelperTexts(tuple(given), role)).describe()
    return data, record


def _plain_id(value):
    """numpy scalars → Python values (for JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def run_block(lm: LanguageModel, fitted: dict[str, Any], *, methods: list[str], k: float | None, bos: str, long_text: str,
              params: dict, inputs: dict, fit: FitSplit | None, n_boot: int, seed: int, source: str, backend: str,
              excluded: int, n_texts: int, helpers: dict | None = None) -> dict:
    """What a reader needs to trust and repeat an evaluation: model, data, every setting and seed, code version."""
    ref_model, freq = inputs.get("ref_model"), inputs.get("freq")
    return {
        "model": lm.name, "spec": lm.spec, "fingerprint": lm.fingerprint, "dtype": str(lm.dtype).removeprefix("torch."),
        "input": source, "n_texts": n_texts, "methods": methods,
        "method_labels": {m: get_method(m).label for m in methods}, "k": k, "bos": bos, "long_text": long_text,
        "ref_model": getattr(ref_model, "spec", ref_model), "freq": _describe(freq),
        "params": {n: _describe(v) for n, v in params.items()},
        "classifier": _describe(inputs.get("classifier")),
        "fit": None if fit is None else {**asdict(fit), "methods": list(fitted)},
        "fitted": {m: v.describe() for m, v in fitted.items()},
        "n_boot": n_boot, "seed": seed, "backend": backend, "excluded_training_rows": excluded,
        "helper_split": (helpers or {}).get("split"),
        "helper_sources": {r: v["source"] for r, v in (helpers or {}).items() if r != "split"},
        "code_version": code_version(), "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def reproduce_command(run: dict, *, input_name: str | None = None, per_class: int | None = None,
                      text_column: str = "text", label_column: str = "label") -> str:
    """The `mia eval` command line that repeats the run described by a run block (same model, dtype, data, settings, seeds)."""
    words = ["mia", "eval", "--model", run["spec"], "--input", input_name or run["input"],
             "--methods", ",".join(run["methods"]), *(["--k", str(run["k"])] if run.get("k") is not None else []),
             "--bos", run["bos"], "--long-text", run["long_text"], "--n-boot", str(run["n_boot"]), "--seed", str(run["seed"]),
             "--dtype", run["dtype"]]
    if (text_column, label_column) != ("text", "label"):
        words += ["--text-column", text_column, "--label-column", label_column]
    if per_class is not None:
        words += ["--per-class", str(per_class)]
    if run.get("fit"):
        words += ["--fit", str(run["fit"]["train_fraction"]), "--fit-seed", str(run["fit"]["seed"])]
    for name, value in run["params"].items():
        words += ["--param", f"{name}={value}"]
    if run.get("classifier"):
        words += ["--param", f"classifier={run['classifier']}"]
    if run.get("ref_model"):
        words += ["--ref-model", str(run["ref_model"])]
    for role, where in (run.get("helper_sources") or {}).items():
        if not where.startswith("split off"):
            words += [f"--{role.replace('_', '-')}", where]
    if run.get("helper_split"):
        words += ["--n-shots", str(run["helper_split"]["n_shots"]), "--reference-fraction",
                  str(run["helper_split"]["reference_fraction"]), "--helper-seed", str(run["helper_split"]["seed"])]
    if run.get("freq"):
        words += ["--freq", str(run["freq"])]
    words += ["--output", "metrics.json", "--scores-output", "scores.csv"]
    return " ".join(shlex.quote(str(w)) for w in words)


def json_safe(value):
    """NaN and infinities become null and numpy scalars plain numbers: strict JSON parsers accept the result."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_safe(v) for v in value]
    return value


def _nan_for_null(value):
    """None (a JSON-safe NaN) back to NaN for printing; anything else unchanged."""
    return math.nan if value is None else value


def _describe(value):
    """A JSON-able stand-in for a setting: numbers, strings and paths as they are, a model by its spec, else its type."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Path):
        return str(value)
    spec = getattr(value, "spec", None)  # a LanguageModel's spec; a classifier's spec is a dict
    return spec if isinstance(spec, str) else f"<{type(value).__name__} passed in Python>"

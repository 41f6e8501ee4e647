"""`mia gds fit` and `mia gds eval`: GDS, the supervised gradient method (see `mia_core.gds`).

GDS learns from labelled data: both commands split the labelled input (stratified, seeded), fit the
MLP on the training part, and say which split it learned from; `eval` reports on the held-out part.
"""
from __future__ import annotations

import json
from pathlib import Path

import typer

from ..cli import (DeviceOpt, DtypeOpt, ModelOpt, PickleOpt, RemoteCodeOpt, TextColumnOpt, _error, _json_safe,
                   _labelled_input, _load, _progress, _writable, app)

gds_app = typer.Typer(no_args_is_help=True, help="GDS (gradient deviation scores): a supervised method that "
                      "learns from labelled members and non-members.")
app.add_typer(gds_app, name="gds")

LabelledOpt = typer.Option(..., "--input", help=".csv/.tsv/.jsonl/.json with a text and a 0/1 label column, "
                           "or a built-in set: demo-wiki, demo-books (see: mia datasets)")
LabelColumnOpt = typer.Option("label", "--label-column", help="1 = member, 0 = non-member")
FractionOpt = typer.Option(0.3, "--train-fraction", help="share of the labelled texts the MLP learns from "
                           "(stratified; the paper: 0.3)")
SeedOpt = typer.Option(0, "--seed", help="seed of the split, the MLP and the bootstrap")
MaxTokensOpt = typer.Option(512, "--max-tokens", help="tokens per text for the gradients (longer texts are cut)")
BatchOpt = typer.Option(None, "--batch-tokens", help="padded tokens per backward batch (default: 1024 on CPU)")


def _prepare(input: Path, text_column: str, label_column: str, train_fraction: float, max_tokens: int):
    """Labelled data and settings, checked before any model is loaded."""
    from ..gds import GdsSettings

    if not 0 < train_fraction < 1:
        _error(f"--train-fraction must be in (0, 1) (got {train_fraction})")
    if max_tokens < 2:
        _error(f"--max-tokens must be at least 2 (got {max_tokens})")
    data = _labelled_input(input, text_column, label_column)
    return data, GdsSettings(max_tokens=max_tokens)


@gds_app.command("fit")
def gds_fit(
    model: str = ModelOpt,
    input: Path = LabelledOpt,
    output: Path = typer.Option(..., "--output", help="folder for the classifier (spec.json + mlp.npz)"),
    train_fraction: float = FractionOpt,
    seed: int = SeedOpt,
    label_column: str = LabelColumnOpt,
    text_column: str = TextColumnOpt,
    max_tokens: int = MaxTokensOpt,
    batch_tokens: int = BatchOpt,
    device: str = DeviceOpt,
    dtype: str = DtypeOpt,
    allow_pickle: bool = PickleOpt,
    trust_remote_code: bool = RemoteCodeOpt,
) -> None:
    """Fit the GDS classifier on a seeded stratified split of labelled texts and save it (no pickle)."""
    from ..gds import fit_texts

    data, settings = _prepare(input, text_column, label_column, train_fraction, max_tokens)
    if output.exists() and not output.is_dir():
        _error(f"--output must be a folder (a file exists at {output})")
    _writable(output)
    lm = _load(model, device, dtype, allow_pickle, trust_remote_code)
    clf = fit_texts(lm, data["text"].tolist(), data["label"].to_numpy(), ids=data["id"].tolist(), settings=settings,
                    train_fraction=train_fraction, seed=seed, source=str(input), batch_tokens=batch_tokens,
                    progress=_progress("gradients"))
    clf.save(output)
    typer.echo(f"GDS classifier, {clf.describe()}")
    typer.echo(f"wrote {output}/spec.json and {output}/mlp.npz "
               f"(score with: mia score --methods gds --param classifier={output})", err=True)


@gds_app.command("eval")
def gds_eval(
    model: str = ModelOpt,
    input: Path = LabelledOpt,
    output: Path = typer.Option(..., "--output", help="metrics JSON (on the held-out texts)"),
    train_fraction: float = FractionOpt,
    seed: int = SeedOpt,
    label_column: str = LabelColumnOpt,
    text_column: str = TextColumnOpt,
    max_tokens: int = MaxTokensOpt,
    batch_tokens: int = BatchOpt,
    n_boot: int = typer.Option(1000, "--n-boot", help="bootstrap resamples for the intervals"),
    scores_output: Path = typer.Option(None, "--scores-output", help="also write the held-out scores (CSV)"),
    device: str = DeviceOpt,
    dtype: str = DtypeOpt,
    allow_pickle: bool = PickleOpt,
    trust_remote_code: bool = RemoteCodeOpt,
) -> None:
    """Fit GDS on a seeded stratified split and evaluate it on the held-out texts (AUROC with CI)."""
    import pandas as pd

    from ..evaluation import evaluate_frame, format_report
    from ..gds import evaluate_texts

    if n_boot < 100:
        _error(f"--n-boot must be at least 100 (got {n_boot})")
    data, settings = _prepare(input, text_column, label_column, train_fraction, max_tokens)
    _writable(output)
    if scores_output is not None:
        _writable(scores_output)
    lm = _load(model, device, dtype, allow_pickle, trust_remote_code)
    labels = data["label"].to_numpy()
    result = evaluate_texts(lm, data["text"].tolist(), labels, ids=data["id"].tolist(), settings=settings,
                            train_fraction=train_fraction, seed=seed, n_boot=n_boot, source=str(input),
                            batch_tokens=batch_tokens, progress=_progress("gradients"))
    test = data.iloc[result.test_idx]
    scores = pd.DataFrame({"gds": result.test_scores})
    report = evaluate_frame(scores, labels[result.test_idx], test["text"].tolist(), n_boot=n_boot, seed=seed)
    report["split"] = result.report["split"]
    report["supervised"] = result.classifier.describe()
    report["run"] = {"model": lm.name, "fingerprint": lm.fingerprint, "input": str(input), "method": "gds",
                     "lora": result.classifier.spec["lora"], "mlp": result.classifier.spec["mlp"],
                     "n_boot": n_boot, "seed": seed}
    output.write_text(json.dumps(_json_safe(report), indent=2))
    if scores_output is not None:
        test.drop(columns=["text"]).assign(gds=result.test_scores).to_csv(scores_output, index=False)
    typer.echo(f"GDS, {result.classifier.describe()}; metrics on the {len(test)} held-out texts:")
    typer.echo(format_report(report, ["gds"]))
    typer.echo(f"wrote {output}", err=True)

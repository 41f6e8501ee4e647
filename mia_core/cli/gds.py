"""`mia gds fit` and `mia gds eval`: GDS, the supervised gradient method (see `mia_core.methods.gds`).

GDS learns from labelled data: both commands split the labelled input (stratified, seeded), fit the
MLP on the training part, and say which split it learned from; `eval` reports on the held-out part.
"""
from __future__ import annotations

from pathlib import Path

import typer

from ..evaluation import GdsFit, evaluate_methods
from ..methods.gds.classifier import fit_texts
from ..methods.gds.features import GdsSettings
from .app import fail
from ..model.options import ModelOptions
from .groups import load, option_groups
from .options import LabelColumnOpt, ModelOpt, NBootOpt, TextColumnOpt, check_options, labelled_input, writable
from .progress import progress_bar
from .score import report_eval

commands = typer.Typer()
gds_app = typer.Typer(no_args_is_help=True, help="GDS (gradient deviation scores): a supervised method that "
                        "learns from labelled members and non-members.")
commands.add_typer(gds_app, name="gds")

LabelledOpt = typer.Option(..., "--input", help=".csv/.tsv/.jsonl/.json with a text and a 0/1 label column, "
                           "or a built-in set: demo-wiki, demo-books (see: mia datasets)")
FractionOpt = typer.Option(0.3, "--train-fraction", help="share of the labelled texts the MLP learns from "
                           "(stratified; the paper: 0.3)")
SeedOpt = typer.Option(0, "--seed", help="seed of the split, the MLP and the bootstrap")
MaxTokensOpt = typer.Option(512, "--max-tokens", help="tokens per text for the gradients (longer texts are cut)")
BatchOpt = typer.Option(None, "--batch-tokens", help="padded tokens per backward batch (default: 1024 on CPU)")


def _prepare(input: Path, text_column: str, label_column: str, train_fraction: float, max_tokens: int):
    """Labelled data and settings, checked before any model is loaded."""
    if not 0 < train_fraction < 1:
        fail(f"--train-fraction must be in (0, 1) (got {train_fraction})")
    if max_tokens < 2:
        fail(f"--max-tokens must be at least 2 (got {max_tokens})")
    data = labelled_input(input, text_column, label_column)
    return data, GdsSettings(max_tokens=max_tokens)


@gds_app.command("fit")
@option_groups
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
    options: ModelOptions = ModelOptions(),
) -> None:
    """Fit the GDS classifier on a seeded stratified split of labelled texts and save it (no pickle)."""

    data, settings = _prepare(input, text_column, label_column, train_fraction, max_tokens)
    if output.exists() and not output.is_dir():
        fail(f"--output must be a folder (a file exists at {output})")
    writable(output)
    lm = load(model, options)
    clf = fit_texts(lm, data["text"].tolist(), data["label"].to_numpy(), ids=data["id"].tolist(), settings=settings,
                    train_fraction=train_fraction, seed=seed, source=str(input), batch_tokens=batch_tokens,
                    progress=progress_bar("gradients", "tokens"))
    clf.save(output)
    typer.echo(f"GDS classifier, {clf.describe()}")
    typer.echo(f"wrote {output}/spec.json and {output}/mlp.npz "
               f"(score with: mia score --methods gds --param classifier={output})", err=True)


@gds_app.command("eval")
@option_groups
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
    n_boot: int = NBootOpt,
    scores_output: Path = typer.Option(None, "--scores-output", help="also write the held-out scores (CSV)"),
    options: ModelOptions = ModelOptions(),
) -> None:
    """Fit GDS on a seeded stratified split and evaluate it on the held-out texts (AUROC with CI).

    The same evaluation as `mia eval --methods gds --fit-gds FRACTION` (one core function behind both).
    """
    check_options(k=0.2, bos="auto", long_text="sliding", n_boot=n_boot)
    data, settings = _prepare(input, text_column, label_column, train_fraction, max_tokens)
    writable(output)
    if scores_output is not None:
        writable(scores_output)
    lm = load(model, options)
    fit = GdsFit(train_fraction, seed, settings, batch_tokens)
    result = evaluate_methods(lm, data, [], fit_gds=fit, n_boot=n_boot, seed=seed, source=str(input),
                              progress=progress_bar("gradients"))
    held = data.reset_index(drop=True).loc[result.held_out]  # the held-out rows, with their own columns
    result.scores = held.drop(columns=["text"]).assign(gds=result.scores.loc[result.held_out, "gds"].to_numpy())
    result.report["run"]["method"] = "gds"
    report_eval(result, lm, output, scores_output, input, None, text_column, label_column)

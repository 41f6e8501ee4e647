"""`mia fit`: fit a supervised method on a seeded stratified share of labelled texts and save what it learned.

Which methods are supervised, what they fit and how a saved fit is loaded back is the registry's (`spec.supervised`);
`mia score --param NEED=FOLDER` and `mia eval --param NEED=FOLDER` use the saved folder, and `mia eval --fit` fits
and evaluates in one run.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..fitting import FitSplit, fit_supervised, supervised_methods
from ..methods import get_method
from ..model.options import ModelOptions
from .app import fail
from .groups import load, option_groups
from .options import (
    BosOpt, LabelColumnOpt, ModelOpt, ParamOpt, TextColumnOpt, check_fraction, check_options, labelled_input,
    parse_params, writable,
)
from .progress import progress_bar
from .terminal import echo

commands = typer.Typer()


@commands.command("fit")
@option_groups
def fit_cmd(
    model: str = ModelOpt,
    method: str = typer.Option(..., "--method", help="a supervised method (see: mia methods)"),
    input: Path = typer.Option(..., "--input", help=".csv/.tsv/.jsonl/.json with a text and a 0/1 label column, "
                               "or a built-in set: demo-wiki, demo-books (see: mia datasets)"),
    output: Path = typer.Option(..., "--output", help="folder for what the method learned (saved without pickle)"),
    train_fraction: float = typer.Option(0.3, "--train-fraction", help="share of the labelled texts it learns from "
                                         "(stratified; the rest are held out and recorded)"),
    seed: int = typer.Option(0, "--seed", help="seed of the split and of the fit"),
    label_column: str = LabelColumnOpt,
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    batch_tokens: Optional[int] = typer.Option(None, "--batch-tokens", help="padded tokens per batch of the fit's "
                                               "passes (default: the method's own)"),
    param: Optional[List[str]] = ParamOpt,
    options: ModelOptions = ModelOptions(),
) -> None:
    """Fit a supervised method on labelled texts and save what it learned (see: mia methods).

    It learns from a seeded stratified share of the texts (the rest are held out, and the split is recorded) and is
    saved without pickle, for mia score and mia eval (--param NEED=FOLDER).
    """
    spec = get_method(method)
    if spec.supervised is None:
        fail(f"method {method} is not supervised; the supervised methods: {', '.join(supervised_methods()) or 'none'}")
    check_fraction(train_fraction, "--train-fraction")
    check_options(k=None, bos=bos, long_text="sliding")
    if batch_tokens is not None and batch_tokens < 1:
        fail(f"--batch-tokens must be at least 1 (got {batch_tokens})")
    params = parse_params(param, [method])
    data = labelled_input(input, text_column, label_column)
    if output.exists() and not output.is_dir():
        fail(f"--output must be a folder (a file exists at {output})")
    writable(output)
    lm = load(model, options)
    fitted = fit_supervised(lm, method, data["text"].tolist(), data["label"].to_numpy(), ids=data["id"].tolist(),
                            split=FitSplit(train_fraction, seed, batch_tokens), params=params, bos=bos,
                            source=str(input), progress=progress_bar("fitting", None))
    fitted.value.save(output)
    echo(f"{spec.label}, {fitted.value.describe()}")
    echo(f"wrote {output} (score with: mia score --methods {method} --param {spec.supervised.fits}={output})",
               err=True)

"""`mia dataset-inference`: was a suspect set of texts in the model's training data, tested against known non-members."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..dataset_inference import MIN_TEXTS, DiSettings, dataset_inference, feature_table
from ..inputs import datasets
from ..inputs.tables import read_texts
from ..model.options import ModelOptions
from .app import fail
from .groups import load, option_groups
from .options import BosOpt, LongTextOpt, ModelOpt, RefModelOpt, TextColumnOpt, check_options, is_named_set, writable
from .progress import progress_bar
from .terminal import echo

commands = typer.Typer()


def read_side(path: Path, text_column: str, role: str) -> list[str]:
    """The texts of one side, read as `mia score --input` reads them (a file, a folder or a built-in set)."""
    data = datasets.load(str(path)) if is_named_set(path) else read_texts(path, text_column=text_column)
    texts = data["text"].tolist()
    if len(texts) < MIN_TEXTS:
        fail(f"--{role} {path}: {len(texts)} texts; dataset inference needs at least {MIN_TEXTS} per side "
             f"(and {2 * MIN_TEXTS} validation texts for the false-positive check)")
    return texts


@commands.command("dataset-inference")
@option_groups
def dataset_inference_cmd(
    model: str = ModelOpt,
    suspect: Path = typer.Option(..., "--suspect", help="the texts suspected of being training data: a file, folder "
                                 "or built-in set, as mia score --input"),
    validation: Path = typer.Option(..., "--validation", help="known non-members of the same kind (same source, "
                                    "time and length), as --suspect; never the suspect texts"),
    output: Path = typer.Option(..., "--output", help="result JSON"),
    text_column: str = TextColumnOpt,
    shuffles: int = typer.Option(10, "--shuffles", help="seeded shuffles; the p-value is their median"),
    seed: int = typer.Option(0, "--seed", help="shuffle i uses seed + i (order and initial weights)"),
    alpha: float = typer.Option(0.1, "--alpha", help="p below this is evidence (the authors' 0.1)"),
    max_train: int = typer.Option(1000, "--max-train", help="texts per side that train the linear model, at most"),
    epochs: int = typer.Option(1000, "--epochs", help="full-batch Adam epochs of the linear model (the authors' 1000)"),
    lowercase: bool = typer.Option(True, "--lowercase/--no-lowercase", help="include the lowercase feature "
                                   "(a second pass of the model over every text)"),
    ref_model: Optional[str] = RefModelOpt,
    bos: str = BosOpt,
    long_text: str = LongTextOpt,
    options: ModelOptions = ModelOptions(),
) -> None:
    """Dataset inference (Maini et al. 2024): many methods' scores, a linear model and a t-test over shuffles."""
    check_options(k=None, bos=bos, long_text=long_text)
    settings = DiSettings(n_shuffles=shuffles, seed=seed, alpha=alpha, max_train=max_train, epochs=epochs)
    suspect_texts = read_side(suspect, text_column, "suspect")
    validation_texts = read_side(validation, text_column, "validation")
    if len(validation_texts) < 2 * MIN_TEXTS:
        fail(f"--validation {validation}: {len(validation_texts)} texts; the false-positive check splits them in "
             f"half, so at least {2 * MIN_TEXTS} are needed")
    shared = set(suspect_texts) & set(validation_texts)
    if shared:
        fail(f"{len(shared)} texts are both suspect and validation texts (e.g. {next(iter(shared))[:40]!r}); "
             "the validation set must hold known non-members only")
    writable(output)
    lm = load(model, options)
    ref = load(ref_model, options) if ref_model else None
    features = feature_table(lm, suspect_texts + validation_texts, lowercase=lowercase, ref_model=ref, bos=bos,
                             long_text=long_text, progress=progress_bar("scoring"))
    result = dataset_inference(features.iloc[:len(suspect_texts)], features.iloc[len(suspect_texts):], settings)
    report = {**result.to_dict(), "model": model, "fingerprint": lm.fingerprint, "suspect": str(suspect),
              "validation": str(validation), "bos": bos, "long_text": long_text, "ref_model": ref_model}
    output.write_text(json.dumps(report, indent=2))
    check = result.check
    echo(f"p-value: {result.p_value:.4g} (median of {shuffles}; {result.test.n_train} texts per side trained "
               f"the model, {result.test.n_test_suspect} suspect and {result.test.n_test_validation} validation held out)")
    echo(f"false-positive check (validation vs itself): p = {check.p_value:.4g} — "
               f"{'REJECTS: the result cannot be trusted' if check.rejects else 'does not reject, as it should'}")
    echo(result.conclusion)
    echo(f"wrote {output}", err=True)

"""`mia reference build|show`, and the reference set behind `mia score --reference`: p-values per text."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import pandas as pd
import typer

from ..api import MODEL_NEEDS
from ..methods import get_method
from ..model.language_model import LanguageModel
from ..model.options import ModelOptions
from ..reference import (
    DEMO_REFERENCE, ReferenceSet, build_reference, cached_reference, check_demo_model, check_model, compare,
    demo_texts, is_reference_folder, kept_reference, load_reference, references_dir, save_reference,
    setting_conflicts,
)
from .app import fail
from .groups import load, option_groups
from .options import (
    BosOpt, LongTextOpt, MethodsKOpt, MethodsOpt, ModelOpt, ParamOpt, TextColumnOpt, check_options, is_named_set,
    method_names, parse_params,
)
from .progress import progress_bar
from ..inputs import datasets
from ..inputs.tables import read_texts
from .terminal import echo

commands = typer.Typer()
reference_app = typer.Typer(no_args_is_help=True, help="Reference sets: known non-members' scores, for p-values "
                            "(mia score --reference).")
commands.add_typer(reference_app, name="reference")


def check_reference_methods(names: list[str]) -> None:
    """Refuse methods whose scores depend on more than the text and model (helper texts, a classifier, extra models)."""
    for name in names:
        extra = set(get_method(name).needs) - set(MODEL_NEEDS)
        if extra:
            fail(f"method {name} needs {', '.join(sorted(extra))}: a reference set keeps only methods scored from "
                 "the text and the target model alone")


@reference_app.command("build")
@option_groups
def build(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help="known non-member texts of the same kind as the texts you will "
                               "test (.csv/.tsv/.jsonl/.json, a folder of .txt/.md/.pdf/.epub, or a built-in set)"),
    output: Path = typer.Option(..., "--output", help="folder to write (reference.json + scores.csv)"),
    methods: str = MethodsOpt,
    k: Optional[float] = MethodsKOpt,
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    long_text: str = LongTextOpt,
    param: Optional[List[str]] = ParamOpt,
    options: ModelOptions = ModelOptions(),
) -> None:
    """Score known non-members once and save their scores, for p-values of other texts under the same model."""
    names = method_names(methods)
    check_reference_methods(names)
    check_options(k=k, bos=bos, long_text=long_text)
    data = datasets.load(str(input)) if is_named_set(input) else read_texts(input, text_column=text_column)
    if "label" in data and set(data["label"].unique()) - {0}:
        fail("the reference input has rows labelled as members (label 1); a reference set holds known non-members only")
    if output.exists() and not output.is_dir():
        fail(f"--output must be a folder: {output.name} is a file")
    params = parse_params(param, names)
    lm = load(model, options)
    reference = build_reference(lm, data["text"].tolist(), names, k=k, bos=bos, long_text=long_text,
                                params=params, source=str(input), progress=progress_bar("scoring"))
    save_reference(reference, output)
    echo(reference.describe())
    echo(f"wrote {output}", err=True)


@reference_app.command("show")
def show(folder: Path = typer.Argument(..., help="a folder written by mia reference build")) -> None:
    """Print what a reference set holds: model, fingerprint, settings, sizes and score ranges."""
    reference = load_reference(folder)
    echo(reference.describe())
    echo(json.dumps({k: v for k, v in reference.manifest().items() if k != "format"}, indent=2))
    echo(reference.table[list(reference.methods)].describe().loc[["min", "50%", "max"]].to_string())


def is_reference_set(path: Path | None) -> bool:
    """Whether `mia score --reference` names a reference set (a saved folder or "demo") or a method's reference texts."""
    return path is not None and (is_reference_folder(path) or (str(path) == DEMO_REFERENCE and not path.exists()))


def resolve_settings(path: Path, *, k: float | None, bos: str, long_text: str, params: dict) -> tuple[float | None, dict]:
    """The k and parameters to score with so that scores compare with a saved reference set (conflicts fail)."""
    if str(path) == DEMO_REFERENCE and not path.exists():
        return k, params
    reference = load_reference(path)
    conflicts = setting_conflicts(reference, k=reference.k if k is None else k, bos=bos, long_text=long_text)
    conflicts += [f"{n}={params[n]!r} (the reference used {reference.params.get(n)!r})" for n in params
                  if params[n] != reference.params.get(n)]
    if conflicts:
        fail("scores would not be comparable with the reference set: " + "; ".join(conflicts)
             + ". Drop these options or rebuild the reference set with them")
    return reference.k, {**reference.params, **params}


def reference_for(path: Path, lm: LanguageModel, names: list[str], *, k: float | None, bos: str,
                  params: dict) -> ReferenceSet:
    """The reference set `mia score --reference` compares with: a saved folder (checked) or the demo's built-in one."""
    if str(path) == DEMO_REFERENCE and not path.exists():
        check_reference_methods(names)
        check_demo_model(lm)
        texts, source = demo_texts()
        kept = kept_reference(lm, texts, names, k=k, bos=bos, params=params, source=source)
        if kept is not None:
            return kept
        echo("scoring the demo reference set (half the demo-wiki non-members) once for this model and setting; it is "
             f"kept in {references_dir()} for later runs …", err=True)
        return cached_reference(lm, texts, names, k=k, bos=bos, params=params, source=source,
                                progress=progress_bar("reference"))
    reference = load_reference(path)
    check_model(reference, lm.fingerprint, lm.name)
    return reference


def add_p_values(df: pd.DataFrame, reference: ReferenceSet, texts: list[str], lm: LanguageModel,
                 names: list[str]) -> pd.DataFrame:
    """The scores with p_<method>, pct_<method> (p_adj_<method> for several texts) and the length check; notes on stderr."""
    extra, notes = compare(reference, df[names], texts, df["n_tokens"])
    dtype = str(lm.dtype).removeprefix("torch.")
    if dtype != reference.dtype:
        notes.append(f"the reference was scored in {reference.dtype}, these texts in {dtype}: scores differ slightly")
    for note in notes:
        echo(f"note: {note}", err=True)
    echo(f"p-values against {reference.describe()}", err=True)
    return pd.concat([df, extra], axis=1)

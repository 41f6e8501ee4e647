"""`mia score` and `mia eval`: score texts, and evaluate methods on labelled texts (the one evaluation path)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, List, Optional

import typer

from ..csv_safe import to_csv_safe
from ..evaluation import evaluate_methods, format_report, reproduce_command
from ..fitting import FitSplit
from ..methods import get_method
from ..methods.helper_texts import HelperSplit
from ..inputs import datasets
from ..inputs.text_parts import TextParts, frame_parts, text_parts
from ..model.language_model import LanguageModel
from ..model.options import ModelOptions, ModelRef
from ..runs.ray_driver import WorkerError
from ..scoring.parts import PART_CHARS, PART_TEXTS, can_part, score_parts
from ..model.chat.spec import is_chat_spec
from .app import fail
from .reference import add_p_values, is_reference_set, reference_for, resolve_settings
from .groups import Backend, load, option_groups
from .options import (
    BosOpt, FreqOpt, LabelColumnOpt, LongTextOpt, MethodsKOpt, MethodsOpt, ModelOpt, NBootOpt, ParamOpt, ReferenceOpt,
    RefModelOpt, ScoreReferenceOpt, ShotsMembersOpt, ShotsNonmembersOpt, TextColumnOpt, check_options, helper_texts,
    check_fits, check_fraction, is_named_set, labelled_input, method_inputs, method_names, parse_params, users,
    writable,
)
from .progress import answer_note, progress_bar
from .score_api import score_api
from .terminal import echo

commands = typer.Typer()

DEMO_SET_NOTES = {
    name: f"{name} is a seeded random member/non-member split of one source, so the blind baseline should "
          "sit near 0.5; only demo-known was trained on the members (the base demo model should be near chance)"
    for name in ("demo-wiki", "demo-books")
}


@commands.command("score")
@option_groups
def score(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help=".txt/.md/.pdf/.epub (one document = one text), a folder of them, "
                               ".csv/.tsv/.jsonl/.json, or a built-in set (see: mia datasets)"),
    output: Path = typer.Option(..., "--output", help="CSV of scores, one row per text"),
    methods: str = MethodsOpt,
    k: Optional[float] = MethodsKOpt,
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    long_text: str = LongTextOpt,
    ref_model: Optional[str] = RefModelOpt,
    freq: Optional[Path] = FreqOpt,
    param: Optional[List[str]] = ParamOpt,
    shots_nonmembers: Optional[Path] = ShotsNonmembersOpt,
    shots_members: Optional[Path] = ShotsMembersOpt,
    reference: Optional[Path] = ScoreReferenceOpt,
    options: ModelOptions = ModelOptions(),
    backend: Backend = Backend(),
) -> None:
    """Score texts with membership-inference methods (higher = more likely a member)."""
    names = method_names(methods)
    check_options(k=k, bos=bos, long_text=long_text)
    data = frame_parts(datasets.load(str(input))) if is_named_set(input) else text_parts(input, text_column=text_column)
    against = is_reference_set(reference)  # a reference set for p-values, else a method's reference population
    helpers = helper_texts(names, {"shots_nonmembers": shots_nonmembers, "shots_members": shots_members,
                                   "reference": None if against else reference}, required=True)
    params = parse_params(param, names)
    writable(output)
    if is_chat_spec(model):  # sampled next words through a chat API, with an evidence record
        score_api(model, data, names, helpers, params, output)
        return
    inputs = method_inputs(names, params, ref_model=ref_model, freq=freq, options=options)
    check_fits(names, inputs, None, can_fit=False)
    if against:
        k, params = resolve_settings(reference, k=k, bos=bos, long_text=long_text, params=params)
    where = backend.where(ModelRef(model, options))
    lm = load(model, backend.driver(options))
    ref_set = reference_for(reference, lm, names, k=k, bos=bos, params=params) if against else None
    extra = {**params, **inputs, **helpers}
    answer_note(lm, data.texts(), bos)  # reads the texts only for a served model that sends whole distributions
    parts, counted = _parts(data, names)
    try:
        df = score_parts(lm, parts, names, k=k, bos=bos, long_text=long_text, **counted, **where, **extra)
    except WorkerError as err:
        fail(str(err))
    if ref_set is not None:
        df = add_p_values(df, ref_set, data.texts(), lm, names)
    to_csv_safe(df, output)
    echo(f"wrote {len(df)} rows × {len(names)} methods to {output}", err=True)


def _parts(data: TextParts, names: list[str]) -> tuple[list | Iterator, dict]:
    """The parts to score the texts in, and how their progress is counted (`score_table`'s progress or texts_done):
    one part counted in tokens when the texts fit one or a method sees all texts at once, else parts of `PART_TEXTS`
    texts and `PART_CHARS` characters, counted in texts (a part's tokens are not known before it is read)."""
    if data.count(PART_TEXTS, PART_CHARS) == 1 or not can_part(names):
        return [data.whole()], {"progress": progress_bar("scoring")}
    progress, done = progress_bar("scoring", "texts"), [0]

    def texts_done(count: int) -> None:
        done[0] += count
        progress(done[0], data.n)

    return data.parts(PART_TEXTS, PART_CHARS), {"texts_done": texts_done}


@commands.command("eval")
@option_groups
def evaluate_cmd(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help=".csv/.tsv/.jsonl/.json with a text and a 0/1 label column, "
                               "or a built-in set: demo-wiki, demo-books (see: mia datasets)"),
    output: Path = typer.Option(..., "--output", help="metrics JSON"),
    methods: str = MethodsOpt,
    label_column: str = LabelColumnOpt,
    text_column: str = TextColumnOpt,
    k: Optional[float] = MethodsKOpt,
    bos: str = BosOpt,
    long_text: str = LongTextOpt,
    ref_model: Optional[str] = RefModelOpt,
    freq: Optional[Path] = FreqOpt,
    n_boot: int = NBootOpt,
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap and the blind baseline"),
    per_class: Optional[int] = typer.Option(None, "--per-class", help="evaluate a seeded sample of at most this many "
                                            "texts per class (as the Benchmark page does)"),
    fit: Optional[float] = typer.Option(None, "--fit", help="also fit every chosen supervised method on this share of "
                                        "the texts (stratified); every method is then evaluated on the rest"),
    fit_seed: Optional[int] = typer.Option(None, "--fit-seed", help="seed of that split and of the fits (default: "
                                           "--seed)"),
    scores_output: Optional[Path] = typer.Option(None, "--scores-output", help="also write per-sample scores (CSV)"),
    param: Optional[List[str]] = ParamOpt,
    shots_nonmembers: Optional[Path] = ShotsNonmembersOpt,
    shots_members: Optional[Path] = ShotsMembersOpt,
    reference: Optional[Path] = ReferenceOpt,
    n_shots: Optional[int] = typer.Option(None, "--n-shots", help="prefix shots per class split off the labelled "
                                          "input when no --shots-* file is given (default: n_shots, else 10)"),
    reference_fraction: float = typer.Option(0.3, "--reference-fraction", help="share of the non-members split off "
                                             f"as the reference population of {', '.join(users('reference'))} when "
                                             "no --reference is given"),
    helper_seed: int = typer.Option(0, "--helper-seed", help="seed of that split; split-off texts are scored by no "
                                    "method"),
    options: ModelOptions = ModelOptions(),
    backend: Backend = Backend(),
) -> None:
    """Evaluate methods on labelled texts: AUROC with CI, TPR at low FPR, and the blind baseline."""
    names = method_names(methods)
    check_options(k=k, bos=bos, long_text=long_text, n_boot=n_boot)
    if fit is not None:
        check_fraction(fit, "--fit")
    data = labelled_input(input, text_column, label_column, per_class)
    helpers = helper_texts(names, {"shots_nonmembers": shots_nonmembers, "shots_members": shots_members,
                                   "reference": reference}, required=False)
    writable(output)
    if scores_output is not None:
        writable(scores_output)
    params = parse_params(param, names)
    inputs = {**method_inputs(names, params, ref_model=ref_model, freq=freq, options=options), **helpers}
    check_fits(names, inputs, fit)
    try:
        split = HelperSplit(n_shots=int(params.get("n_shots", HelperSplit.n_shots)) if n_shots is None else n_shots,
                            reference_fraction=reference_fraction, seed=helper_seed)
    except ValueError as err:
        fail(str(err))
    where = backend.where(ModelRef(model, options))
    lm = load(model, backend.driver(options))
    fit_split = None if fit is None else FitSplit(fit, seed if fit_seed is None else fit_seed)
    try:
        result = evaluate_methods(lm, data, names, k=k, bos=bos, long_text=long_text, params=params, inputs=inputs,
                                  fit=fit_split, n_boot=n_boot, seed=seed, source=str(input),
                                  progress=progress_bar("scoring"), helper_split=split, **where)
    except WorkerError as err:
        fail(str(err))
    report_eval(result, lm, output, scores_output, input, per_class, text_column, label_column)
    if is_named_set(input) and str(input) in DEMO_SET_NOTES:
        echo(f"note: {DEMO_SET_NOTES[str(input)]}")


def report_eval(result, lm: LanguageModel, output: Path, scores_output: Path | None, input: Path,
                per_class: int | None, text_column: str = "text", label_column: str = "label") -> None:
    """Write the metrics JSON (and scores CSV), print the table, the held-out note and the reproducing command."""
    report, excluded = result.report, int((~result.held_out).sum())
    given = [get_method(m).label for m in report["run"]["methods"] if get_method(m).supervised and m not in result.fitted]
    if excluded and given:
        echo(f"note: {excluded} of {len(result.held_out)} texts were in the training split of "
                   f"{', '.join(given)}; every method is evaluated on the other {int(result.held_out.sum())}", err=True)
    for role, record in {r: v for r, v in report.get("helpers", {}).items() if r != "split"}.items():
        echo(f"note: {record['n']} texts as {role} ({record['source']}); no method scores them", err=True)
    report["run"]["command"] = reproduce_command(report["run"], input_name=str(input), per_class=per_class,
                                                 text_column=text_column, label_column=label_column)
    output.write_text(json.dumps(report, indent=2))
    if scores_output is not None:
        to_csv_safe(result.scores, scores_output)
    for method, value in result.fitted.items():
        echo(f"{get_method(method).label}, {value.describe()}; metrics on the {int(result.held_out.sum())} "
                   "held-out texts:")
    echo(format_report(report, report["run"]["methods"]))
    echo(f"wrote {output}", err=True)

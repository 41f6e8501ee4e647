"""What the `mia` commands share: option types, method parameters and inputs, input and option checks.

Options that name a need or a parameter say which methods use them, asked of the registry (no command names a
method); the shared model and backend options are option groups (`groups`).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from ..api import HELPER_NEEDS, REF_NEEDS, check_k
from ..fitting import supervised_methods
from ..inputs import datasets
from ..inputs.tables import read_labelled, read_texts
from ..methods import METHODS, get_method
from ..methods.helper_texts import ROLES, HelperTexts
from ..model.options import ModelOptions
from ..model.policy import BOS_POLICIES, LONG_TEXT_POLICIES
from ..names import unknown_name
from .app import fail
from .groups import load

DEFAULT_METHODS = "loss,zlib,min_k,min_k_pp"


def users(need: str | tuple[str, ...], methods: list[str] | None = None) -> list[str]:
    """The methods (of `methods`, default: all registered) that need `need` (or one of several), in registry order."""
    needs = (need,) if isinstance(need, str) else need
    return [m for m in (list(METHODS) if methods is None else methods) if set(needs) & set(get_method(m).needs)]


def k_defaults() -> str:
    """Each method's own default k, e.g. "0.2 for min_k, min_k_pp; 0.4 for surp" (from the registry)."""
    by_default: dict = {}
    for spec in METHODS.values():
        for info in spec.param_infos:
            if info.name == "k":
                by_default.setdefault(info.default, []).append(spec.name)
    return "; ".join(f"{default:g} for {', '.join(names)}" for default, names in by_default.items())


ModelOpt = typer.Option(..., "--model", help="'demo', a local folder, a Hugging Face hub id, or a server's URL with settings "
                        "(http://HOST:PORT/v1?model=NAME; docs: Models, Served models)")
MethodsOpt = typer.Option(DEFAULT_METHODS, "--methods", help="comma-separated method names (see: mia methods)")
KOpt = typer.Option(0.2, "--k", help="fraction of tokens, for a method with a parameter k")
MethodsKOpt = typer.Option(None, "--k", help=f"fraction of tokens for every chosen method with a k (default: each "
                           f"method's own: {k_defaults()})")
TextColumnOpt = typer.Option("text", "--text-column", help="column holding the text in a .csv/.tsv/.jsonl/.json input")
LabelColumnOpt = typer.Option("label", "--label-column", help="1 = member, 0 = non-member")
#: Extraction windows and sampling scheme (mia extract, mia audit-books --extraction): Cooper et al.'s defaults.
PrefixOpt = typer.Option(50, "--prefix", help="extraction: tokens the model is given per window (the paper: 50)")
SuffixOpt = typer.Option(50, "--suffix", help="extraction: tokens it must reproduce (the paper: 50)")
StrideOpt = typer.Option(10, "--stride", help="extraction: tokens between window starts; the model reads each text "
                         "token (prefix+suffix)/stride times (50: every suffix token once, at 2×)")
TopKOpt = typer.Option(40, "--top-k", help="extraction: top-k sampling's k (the paper: 40); greedy is reported too")
TemperatureOpt = typer.Option(1.0, "--temperature", help="extraction: sampling temperature (the paper: 1)")
WindowsOpt = typer.Option("ours", "--windows", help="extraction: ours (windows of the text's tokens, --stride in "
                          "tokens) or reference (Cooper et al.'s code: --stride in characters, each slice "
                          "re-tokenised, BOS inside the prefix, a tie at the top as 1/m)")
BosOpt = typer.Option("auto", "--bos", help="auto: prepend the document-boundary token; none: reference-code behaviour")
LongTextOpt = typer.Option("sliding", "--long-text", help="sliding or truncate, for texts longer than the context")
RefModelOpt = typer.Option(None, "--ref-model", help="reference model ('demo', a folder or a hub id), for "
                           f"{', '.join(users(REF_NEEDS))}")
FreqOpt = typer.Option(None, "--freq", help=f"token-frequency table (mia freq build), for {', '.join(users('freq'))}")
ParamOpt = typer.Option(None, "--param", help="NAME=VALUE for a method parameter, repeatable; see: mia methods")
NBootOpt = typer.Option(1000, "--n-boot", help="bootstrap resamples for the intervals")

ShotsNonmembersOpt = typer.Option(None, "--shots-nonmembers", help="known non-member texts (a file or folder, as "
                                  f"--input) for the prefixes of {', '.join(users('shots_nonmembers'))}; never the "
                                  "scored texts")
ShotsMembersOpt = typer.Option(None, "--shots-members", help="known member texts (a file or folder) for the member "
                               f"prefix of {', '.join(users('shots_members'))}; never the scored texts")
ReferenceOpt = typer.Option(None, "--reference", help=f"known non-member texts (a file or folder) for the reference "
                            f"population of {', '.join(users('reference'))}; never the scored texts")
ScoreReferenceOpt = typer.Option(None, "--reference", help="a reference set (a folder from: mia reference build, or "
                                 "'demo' for the demo models) → p_<method> columns; or known non-member texts (a "
                                 f"file or folder) for the reference population of {', '.join(users('reference'))}")


def method_names(spec: str) -> list[str]:
    """`--methods a,b,c` as a list, each checked against the registry (unknown names get a "did you mean")."""
    names = list(dict.fromkeys(m.strip() for m in spec.split(",") if m.strip()))
    if not names:
        fail("--methods is empty; give e.g. loss,zlib,min_k,min_k_pp")
    for name in names:
        get_method(name)
    return names


def check_options(*, k: float | None, bos: str, long_text: str, n_boot: int = 1000) -> None:
    """Reject bad option values before any model is loaded (k None: each method's own default)."""
    if k is not None:
        check_k(k)
    if bos not in BOS_POLICIES:
        fail(f"--bos must be one of {', '.join(BOS_POLICIES)} (got {bos!r})")
    if long_text not in LONG_TEXT_POLICIES:
        fail(f"--long-text must be one of {', '.join(LONG_TEXT_POLICIES)} (got {long_text!r})")
    if n_boot < 100:
        fail(f"--n-boot must be at least 100 (got {n_boot})")


def parse_params(pairs: list[str] | None, methods: list[str]) -> dict:
    """`--param NAME=VALUE` pairs as a dict; values read as int, float or true/false where they look like one.

    Each NAME must be a parameter of one of `methods`, or what a chosen supervised method fits (its saved folder);
    an unknown one gets a "did you mean".
    """
    known = list(dict.fromkeys(n for m in methods for n in get_method(m).param_names))
    fitted = fitted_needs(methods)
    params = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            fail(f"--param expects NAME=VALUE (got {pair!r})")
        if name not in known and name not in fitted:
            if not known:
                fail(f"--param {name}: none of the chosen methods ({', '.join(methods)}) takes a parameter")
            fail(f"--param: {unknown_name('parameter', name, known)} for {', '.join(methods)}; see: mia methods")
        params[name] = _literal(raw.strip())
    return params


def fitted_needs(methods: list[str]) -> dict[str, str]:
    """{need: method} for the chosen supervised methods: `--param NEED=FOLDER` supplies a fit saved by mia fit."""
    return {spec.supervised.fits: spec.name for spec in map(get_method, methods) if spec.supervised is not None}


def method_inputs(methods: list[str], params: dict, *, ref_model: str | None, freq: Path | None,
                  options: ModelOptions) -> dict:
    """What the chosen methods need from the command line, by need: a loaded reference model (`--ref-model`), a
    frequency table (`--freq`), the folder of a fit saved by mia fit (`--param NEED=FOLDER`, taken out of `params`)."""
    inputs: dict = {}
    for need, flag, value in ((REF_NEEDS, "--ref-model", ref_model), ("freq", "--freq", freq)):
        needing = users(need, methods)
        if needing and not value:
            fail(f"{', '.join(needing)} {'needs' if len(needing) == 1 else 'need'} {flag} ({_WHAT[flag]})")
        if value and not needing:
            fail(f"{flag} is used by none of the chosen methods (it is for {', '.join(users(need)) or 'none'})")
    if users(REF_NEEDS, methods):
        inputs["ref_model"] = load(ref_model, options)
    if users("freq", methods):
        inputs["freq"] = freq
    for need, method in fitted_needs(methods).items():
        if need in params:
            folder = Path(str(params.pop(need)))
            if not folder.is_dir():
                fail(f"--param {need}={folder}: no such folder (save a fit of {method} with: mia fit --method {method})")
            inputs[need] = folder  # loaded by the method's own loader; its path is recorded in the run
    return inputs


def check_fraction(fraction: float, flag: str) -> None:
    """A training share is a fraction strictly between 0 and 1."""
    if not 0 < fraction < 1:
        fail(f"{flag} must be in (0, 1) (got {fraction})")


def check_fits(methods: list[str], inputs: dict, fit: float | None, *, can_fit: bool = True) -> None:
    """Each chosen supervised method gets one fit: made here (`--fit`, where `can_fit`) or saved by mia fit
    (`--param NEED=FOLDER`); `--fit` with no supervised method chosen is refused."""
    needs = fitted_needs(methods)
    if fit is not None and not needs:
        fail(f"--fit fits the chosen supervised methods, and none of {', '.join(methods)} is one (supervised: "
             f"{', '.join(supervised_methods()) or 'none'})")
    for need, method in needs.items():
        if fit is not None and need in inputs:
            fail(f"--fit and --param {need}=… both give {method} a fit; choose one")
        if fit is None and need not in inputs:
            here = "fit it here with --fit FRACTION, or " if can_fit else ""
            fail(f"{method} learns from labelled texts: {here}give it a fit saved by mia fit with --param "
                 f"{need}=FOLDER")


#: What each need an option supplies is, for the message when it is missing.
_WHAT = {"--ref-model": "a reference model: 'demo', a folder or a hub id",
         "--freq": "a token-frequency table; build one with: mia freq build"}


def _literal(raw: str):
    """'5' → 5, '0.1' → 0.1, 'true'/'false' → bool, anything else stays a string."""
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def writable(path: Path) -> Path:
    """The output path, or an error when its folder does not exist (before any work is done)."""
    if not path.parent.exists():
        fail(f"output folder does not exist: {path.parent}")
    return path


def is_named_set(path: Path) -> bool:
    """True when --input names a built-in set (demo-wiki, …) rather than an existing file."""
    return not path.exists() and str(path) in datasets.DESCRIPTIONS


def labelled_input(path: Path, text_column: str, label_column: str, per_class: int | None = None) -> pd.DataFrame:
    """A labelled file, or a built-in demo set named instead of a file; optionally a seeded sample per class."""
    data = datasets.load(str(path)) if is_named_set(path) else read_labelled(path, text_column=text_column,
                                                                             label_column=label_column)
    if per_class is not None:
        if per_class < 1:
            fail(f"--per-class must be at least 1 (got {per_class})")
        data = datasets.sample_per_class(data, per_class)
    return data


def helper_texts(methods: list[str], files: dict[str, Path | None], *, text_column: str = "text",
                 required: bool) -> dict[str, HelperTexts]:
    """The helper texts the methods need, read from the files named (`required`: fail when one is missing)."""
    out = {}
    for role in HELPER_NEEDS:
        needing, path = users(role, methods), files.get(role)
        if not needing:
            if path is not None:
                fail(f"--{role.replace('_', '-')} is used by none of the chosen methods")
            continue
        if path is None:
            if required:
                fail(f"method {needing[0]} needs {ROLES[role]}: --{role.replace('_', '-')} FILE (texts that are "
                     "never among the scored ones)")
            continue
        texts = read_texts(path, text_column=text_column)["text"].tolist()
        out[role] = HelperTexts(tuple(texts), role, source=str(path))
    return out


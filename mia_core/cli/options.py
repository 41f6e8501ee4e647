"""What the `mia` commands share: option types, `LoadOptions`, input and option checks."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import typer

from ..inputs import datasets
from ..inputs.tables import read_labelled, read_texts
from ..methods import get_method
from ..methods.helper_texts import ROLES, HelperTexts
from ..api import HELPER_NEEDS, check_k
from ..model.language_model import LanguageModel
from ..model.loading import load_model
from ..model.policy import BOS_POLICIES, LONG_TEXT_POLICIES
from ..runs.backends import BACKENDS
from ..runs.ray_driver import RayOptions, require_ray
from .app import fail

DEFAULT_METHODS = "loss,zlib,min_k,min_k_pp"

ModelOpt = typer.Option(..., "--model", help="'demo', a local folder, or a Hugging Face hub id")
MethodsOpt = typer.Option(DEFAULT_METHODS, "--methods", help="comma-separated method names (see: mia methods)")
KOpt = typer.Option(0.2, "--k", help="fraction of tokens for min_k / min_k_pp")
MethodsKOpt = typer.Option(None, "--k", help="fraction of tokens for every chosen method with a k (default: each "
                           "method's own: 0.2 for min_k, min_k_pp, gap_k; 0.4 for surp)")
TextColumnOpt = typer.Option("text", "--text-column", help="column holding the text in a .csv/.tsv/.jsonl/.json input")
LabelColumnOpt = typer.Option("label", "--label-column", help="1 = member, 0 = non-member")
BosOpt = typer.Option("auto", "--bos", help="auto: prepend the document-boundary token; none: reference-code behaviour")
LongTextOpt = typer.Option("sliding", "--long-text", help="sliding or truncate, for texts longer than the context")
RefModelOpt = typer.Option(None, "--ref-model", help="reference model for method ref")
FreqOpt = typer.Option(None, "--freq", help="frequency table for method dc_pdd")
AOpt = typer.Option(0.01, "--a", help="DC-PDD cap on each token's score")
DeviceOpt = typer.Option("auto", "--device", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps")
DtypeOpt = typer.Option("auto", "--dtype", help="auto (bfloat16 on GPUs that support it, else float16; float32 on CPU "
                         "and MPS), float32, bfloat16, float16 or float64")
PickleOpt = typer.Option(False, "--allow-pickle", help="allow pickle (.bin) weights: only for trusted sources")
RemoteCodeOpt = typer.Option(False, "--trust-remote-code", help="run the model repository's own code")
ParamOpt = typer.Option(None, "--param", help="a method parameter NAME=VALUE, repeatable (e.g. --param m=5)")
NBootOpt = typer.Option(1000, "--n-boot", help="bootstrap resamples for the intervals")
BackendOpt = typer.Option("local", "--backend", help="local (this process) or ray (model actors on a Ray cluster; "
                          "pip install -r requirements-scale.txt)")
RayAddressOpt = typer.Option(None, "--ray-address", help="Ray cluster to use with --backend ray (default: $RAY_ADDRESS, "
                             "else a new local instance on this machine)")
RayActorsOpt = typer.Option(None, "--ray-actors", help="model actors with --backend ray (default: one per GPU, "
                            "else one per CPU)")

ShotsNonmembersOpt = typer.Option(None, "--shots-nonmembers", help="known non-member texts (a file or folder, as "
                                  "--input) for the prefixes of recall and con_recall; never the scored texts")
ShotsMembersOpt = typer.Option(None, "--shots-members", help="known member texts (a file or folder) for the member "
                               "prefix of con_recall; never the scored texts")
ReferenceOpt = typer.Option(None, "--reference", help="known non-member texts (a file or folder) for camia's "
                            "reference population; never the scored texts")
ScoreReferenceOpt = typer.Option(None, "--reference", help="a reference set (a folder from: mia reference build, or "
                                 "'demo' for the demo models) → p_<method> columns; or known non-member texts (a "
                                 "file or folder) for camia's reference population")


@dataclass(frozen=True)
class LoadOptions:
    """How a command loads its models (`--device`, `--dtype`, `--allow-pickle`, `--trust-remote-code`)."""

    device: str = "auto"
    dtype: str = "auto"
    allow_pickle: bool = False
    trust_remote_code: bool = False

    def load(self, spec: str) -> LanguageModel:
        """Load a model with these options, saying so on stderr."""
        typer.echo(f"loading model {spec} …", err=True)
        return load_model(spec, **dataclasses.asdict(self))

    def for_driver(self, where: dict) -> "LoadOptions":
        """This process's options: on CPU with the Ray backend (it then only fingerprints the model, counts
        tokens and runs methods' own extra passes), leaving this machine's GPUs to the model actors."""
        return dataclasses.replace(self, device="cpu") if where["backend"] == "ray" else self


def backend_options(backend: str, ray_address: str | None, ray_actors: int | None, load: LoadOptions) -> dict:
    """Where statistics are computed: {"backend", "ray_address", "ray_options"}; checks Ray is installed."""
    if backend not in BACKENDS:
        fail(f"--backend must be one of {', '.join(BACKENDS)} (got {backend!r})")
    if backend == "local":
        if ray_address or ray_actors:
            fail("--ray-address and --ray-actors need --backend ray")
        return {"backend": "local"}
    if ray_actors is not None and ray_actors < 1:
        fail(f"--ray-actors must be at least 1 (got {ray_actors})")
    try:
        require_ray()
    except ImportError as err:
        fail(str(err))
    return {"backend": "ray", "ray_address": ray_address,
            "ray_options": RayOptions(actors=ray_actors, model_options=dataclasses.asdict(load))}


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


def parse_params(pairs: list[str] | None) -> dict:
    """`--param NAME=VALUE` pairs as a dict; values read as int, float or true/false where they look like one."""
    params = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            fail(f"--param expects NAME=VALUE (got {pair!r})")
        params[name.strip()] = _literal(raw.strip())
    return params


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
        users = [m for m in methods if role in get_method(m).needs]
        path = files.get(role)
        if not users:
            if path is not None:
                fail(f"--{role.replace('_', '-')} is used by none of the chosen methods")
            continue
        if path is None:
            if required:
                fail(f"method {users[0]} needs {ROLES[role]}: --{role.replace('_', '-')} FILE (texts that are "
                     "never among the scored ones)")
            continue
        texts = read_texts(path, text_column=text_column)["text"].tolist()
        out[role] = HelperTexts(tuple(texts), role, source=str(path))
    return out


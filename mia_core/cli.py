"""The `mia` command line: score texts, evaluate methods on labelled data, build frequency tables.

Every bad input ends with one line `error: <what is wrong, naming the file>` and exit code 2.
Set MIA_DEBUG=1 to see the traceback instead.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np
import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="MIA Lens: was this text in a model's training data?")
freq_app = typer.Typer(no_args_is_help=True, help="Token-frequency tables (for DC-PDD).")
app.add_typer(freq_app, name="freq")
demo_app = typer.Typer(no_args_is_help=True, help="The known-membership demo (demo-known, demo-wiki, demo-books).")
app.add_typer(demo_app, name="demo")

DEFAULT_METHODS = "loss,zlib,min_k,min_k_pp"
DEMO_SET_NOTES = {
    name: f"{name} is a seeded random member/non-member split of one source, so the blind baseline should "
          "sit near 0.5; only demo-known was trained on the members (the base demo model should be near chance)"
    for name in ("demo-wiki", "demo-books")
}
#: Errors that are the user's input, not a bug: reported in one line with exit code 2.
USER_ERRORS = (ValueError, KeyError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError)


class _Fail(Exception):
    """A user-facing failure already phrased for the terminal."""


def _error(message: str) -> None:
    raise _Fail(message)


def _methods(spec: str) -> list[str]:
    from .methods import get_method

    names = list(dict.fromkeys(m.strip() for m in spec.split(",") if m.strip()))
    if not names:
        _error("--methods is empty; give e.g. loss,zlib,min_k,min_k_pp")
    for name in names:
        get_method(name)  # raises with the list of available methods
    return names


def _progress(label: str):
    """A tqdm bar on stderr driven by the core's progress(done, total) callback."""
    from tqdm.auto import tqdm

    bar = tqdm(desc=label, unit="tok", file=sys.stderr, disable=None, leave=False)

    def update(done: int, total: int | None) -> None:
        if total is not None and bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    return update


def _check_options(*, k: float, bos: str, long_text: str, n_boot: int = 1000) -> None:
    """Reject bad option values before any model is loaded."""
    from .language_model import BOS_POLICIES, LONG_TEXT_POLICIES
    from .methods.registry import check_k

    check_k(k)
    if bos not in BOS_POLICIES:
        _error(f"--bos must be one of {', '.join(BOS_POLICIES)} (got {bos!r})")
    if long_text not in LONG_TEXT_POLICIES:
        _error(f"--long-text must be one of {', '.join(LONG_TEXT_POLICIES)} (got {long_text!r})")
    if n_boot < 100:
        _error(f"--n-boot must be at least 100 (got {n_boot})")


def _json_safe(value):
    """NaN and infinities become null: strict JSON parsers reject them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _writable(path: Path) -> Path:
    if not path.parent.exists():
        _error(f"output folder does not exist: {path.parent}")
    return path


def _load(model: str, device: str, dtype: str, allow_pickle: bool, trust_remote_code: bool):
    from .loading import load_model

    typer.echo(f"loading model {model} …", err=True)
    return load_model(model, device=device, dtype=dtype, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code)


def _outside_gds_training(names: list[str], params: dict, texts: list[str]) -> np.ndarray:
    """True for each text outside the GDS classifier's training split (all True without gds): a supervised
    method's score on its own training rows is not a test, so every method is compared on the rest."""
    if "gds" not in names or "classifier" not in params:
        return np.ones(len(texts), dtype=bool)
    from .gds import as_classifier

    classifier = as_classifier(params["classifier"])
    return np.array([not classifier.trained_on(t) for t in texts], dtype=bool)


def _parse_params(pairs: list[str] | None) -> dict:
    """`--param NAME=VALUE` pairs as a dict; values read as int, float or true/false where they look like one."""
    params = {}
    for pair in pairs or []:
        name, sep, raw = pair.partition("=")
        if not sep or not name.strip():
            _error(f"--param expects NAME=VALUE (got {pair!r})")
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


def _backend(backend: str, ray_address: str | None, ray_actors: int | None, opts: tuple) -> dict:
    """Where statistics are computed: {"backend", "ray_address", "ray_options"}; checks Ray is installed."""
    from .ray_backend import BACKENDS, RayOptions, require_ray

    if backend not in BACKENDS:
        _error(f"--backend must be one of {', '.join(BACKENDS)} (got {backend!r})")
    if backend == "local":
        if ray_address or ray_actors:
            _error("--ray-address and --ray-actors need --backend ray")
        return {"backend": "local"}
    if ray_actors is not None and ray_actors < 1:
        _error(f"--ray-actors must be at least 1 (got {ray_actors})")
    try:
        require_ray()
    except ImportError as err:
        _error(str(err))
    device, dtype, allow_pickle, trust_remote_code = opts
    load = {"device": device, "dtype": dtype, "allow_pickle": allow_pickle, "trust_remote_code": trust_remote_code}
    return {"backend": "ray", "ray_address": ray_address, "ray_options": RayOptions(actors=ray_actors, model_options=load)}


def _driver_opts(opts: tuple, where: dict) -> tuple:
    """Load options of this process's model: on CPU with the Ray backend (it then only fingerprints the model,
    counts tokens and runs methods' own extra passes), leaving this machine's GPUs to the model actors."""
    return ("cpu", *opts[1:]) if where["backend"] == "ray" else opts


def _score_frame(lm, texts, methods, *, k, bos, long_text, ref_model, freq, a, opts, params=None, where=None):
    """Method scores plus per-text token counts and the long-text policy applied."""
    from .ray_backend import WorkerError
    from .scoring import score_texts, text_stats

    where = where or {"backend": "local"}
    extra = dict(params or {})
    if "ref" in methods:
        if not ref_model:
            _error("method ref needs --ref-model")
        extra["ref_model"] = _load(ref_model, *opts)
    if "dc_pdd" in methods:
        if not freq:
            _error("method dc_pdd needs --freq (build one with: mia freq build)")
        extra.update(freq=freq, a=a)
    progress = _progress("scoring")
    try:
        stats = text_stats(lm, texts, bos=bos, long_text=long_text, progress=progress, **where)
        df = score_texts(lm, texts, methods, k=k, bos=bos, long_text=long_text, progress=progress, stats=stats,
                         **where, **extra)
    except WorkerError as err:
        _error(str(err))
    df.insert(0, "n_tokens", [s.n_scored for s in stats])
    df.insert(1, "long_text", [s.long_text for s in stats])
    return df


def _is_named_set(path: Path) -> bool:
    """True when --input names a built-in set (demo-wiki, …) rather than an existing file."""
    from . import datasets

    return not path.exists() and str(path) in datasets.DESCRIPTIONS


def _labelled_input(path: Path, text_column: str, label_column: str):
    """A labelled file, or a built-in demo set named instead of a file."""
    from . import datasets
    from .inputs import read_labelled

    if _is_named_set(path):
        return datasets.load(str(path))
    return read_labelled(path, text_column=text_column, label_column=label_column)


ModelOpt = typer.Option(..., "--model", help="'demo', a local folder, or a Hugging Face hub id")
MethodsOpt = typer.Option(DEFAULT_METHODS, "--methods", help="comma-separated method names (see: mia methods)")
KOpt = typer.Option(0.2, "--k", help="fraction of tokens for min_k / min_k_pp")
TextColumnOpt = typer.Option("text", "--text-column")
BosOpt = typer.Option("auto", "--bos", help="auto: prepend the document-boundary token; none: reference-code behaviour")
LongTextOpt = typer.Option("sliding", "--long-text", help="sliding or truncate, for texts longer than the context")
RefModelOpt = typer.Option(None, "--ref-model", help="reference model for method ref")
FreqOpt = typer.Option(None, "--freq", help="frequency table for method dc_pdd")
AOpt = typer.Option(0.01, "--a", help="DC-PDD cap on each token's score")
DeviceOpt = typer.Option("auto", "--device")
DtypeOpt = typer.Option("auto", "--dtype")
PickleOpt = typer.Option(False, "--allow-pickle", help="allow pickle (.bin) weights: only for trusted sources")
RemoteCodeOpt = typer.Option(False, "--trust-remote-code", help="run the model repository's own code")
ParamOpt = typer.Option(None, "--param", help="a method parameter NAME=VALUE, repeatable (e.g. --param m=5)")
BackendOpt = typer.Option("local", "--backend", help="local (this process) or ray (model actors on a Ray cluster; "
                          "pip install -r requirements-scale.txt)")
RayAddressOpt = typer.Option(None, "--ray-address", help="Ray cluster to use with --backend ray (default: $RAY_ADDRESS, "
                             "else a new local instance on this machine)")
RayActorsOpt = typer.Option(None, "--ray-actors", help="model actors with --backend ray (default: one per GPU, "
                            "else one per CPU)")


@app.command()
def score(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help=".txt/.md (one text), folder of .txt, .csv/.tsv/.jsonl/.json, "
                               "or a built-in set (see: mia datasets)"),
    output: Path = typer.Option(..., "--output", help="CSV of scores, one row per text"),
    methods: str = MethodsOpt,
    k: float = KOpt,
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    long_text: str = LongTextOpt,
    ref_model: Optional[str] = RefModelOpt,
    freq: Optional[Path] = FreqOpt,
    a: float = AOpt,
    param: Optional[List[str]] = ParamOpt,
    device: str = DeviceOpt,
    dtype: str = DtypeOpt,
    allow_pickle: bool = PickleOpt,
    trust_remote_code: bool = RemoteCodeOpt,
    backend: str = BackendOpt,
    ray_address: Optional[str] = RayAddressOpt,
    ray_actors: Optional[int] = RayActorsOpt,
) -> None:
    """Score texts with membership-inference methods (higher = more likely a member)."""
    from . import datasets
    from .inputs import read_texts

    names = _methods(methods)
    _check_options(k=k, bos=bos, long_text=long_text)
    data = datasets.load(str(input)) if _is_named_set(input) else read_texts(input, text_column=text_column)
    _writable(output)
    opts = (device, dtype, allow_pickle, trust_remote_code)
    where = _backend(backend, ray_address, ray_actors, opts)
    lm = _load(model, *_driver_opts(opts, where))
    df = _score_frame(lm, data["text"].tolist(), names, k=k, bos=bos, long_text=long_text,
                      ref_model=ref_model, freq=freq, a=a, opts=opts, params=_parse_params(param), where=where)
    df.insert(0, "id", data["id"].to_numpy())
    df.to_csv(output, index=False)
    typer.echo(f"wrote {len(df)} rows × {len(names)} methods to {output}", err=True)


@app.command("eval")
def evaluate_cmd(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help=".csv/.tsv/.jsonl/.json with a text and a 0/1 label column, "
                               "or a built-in set: demo-wiki, demo-books (see: mia datasets)"),
    output: Path = typer.Option(..., "--output", help="metrics JSON"),
    methods: str = MethodsOpt,
    label_column: str = typer.Option("label", "--label-column", help="1 = member, 0 = non-member"),
    text_column: str = TextColumnOpt,
    k: float = KOpt,
    bos: str = BosOpt,
    long_text: str = LongTextOpt,
    ref_model: Optional[str] = RefModelOpt,
    freq: Optional[Path] = FreqOpt,
    a: float = AOpt,
    n_boot: int = typer.Option(1000, "--n-boot", help="bootstrap resamples for the intervals"),
    seed: int = typer.Option(0, "--seed"),
    scores_output: Optional[Path] = typer.Option(None, "--scores-output", help="also write per-sample scores (CSV)"),
    param: Optional[List[str]] = ParamOpt,
    device: str = DeviceOpt,
    dtype: str = DtypeOpt,
    allow_pickle: bool = PickleOpt,
    trust_remote_code: bool = RemoteCodeOpt,
    backend: str = BackendOpt,
    ray_address: Optional[str] = RayAddressOpt,
    ray_actors: Optional[int] = RayActorsOpt,
) -> None:
    """Evaluate methods on labelled texts: AUROC with CI, TPR at low FPR, and the blind baseline."""
    from .evaluation import evaluate_frame, format_report

    names = _methods(methods)
    _check_options(k=k, bos=bos, long_text=long_text, n_boot=n_boot)
    data = _labelled_input(input, text_column, label_column)
    _writable(output)
    if scores_output is not None:
        _writable(scores_output)
    opts = (device, dtype, allow_pickle, trust_remote_code)
    where = _backend(backend, ray_address, ray_actors, opts)
    lm = _load(model, *_driver_opts(opts, where))
    texts, params = data["text"].tolist(), _parse_params(param)
    df = _score_frame(lm, texts, names, k=k, bos=bos, long_text=long_text, ref_model=ref_model, freq=freq, a=a, opts=opts,
                      params=params, where=where)
    held_out = _outside_gds_training(names, params, texts)
    if not held_out.all():
        typer.echo(f"note: {int((~held_out).sum())} of {len(texts)} texts were in the GDS classifier's training split; "
                   f"every method is evaluated on the other {int(held_out.sum())}", err=True)
    report = evaluate_frame(df.loc[held_out, names], data["label"].to_numpy()[held_out],
                            [t for t, keep in zip(texts, held_out) if keep], n_boot=n_boot, seed=seed)
    report["run"] = {"model": lm.name, "fingerprint": lm.fingerprint, "input": str(input), "methods": names,
                     "k": k, "bos": bos, "long_text": long_text, "ref_model": ref_model,
                     "freq": str(freq) if freq else None, "a": a, "params": params,
                     "n_boot": n_boot, "seed": seed, "backend": backend,
                     "excluded_gds_training_rows": int((~held_out).sum())}
    output.write_text(json.dumps(_json_safe(report), indent=2))
    if scores_output is not None:
        df.insert(0, "label", data["label"].to_numpy())
        df.insert(0, "id", data["id"].to_numpy())
        if not held_out.all():
            df["in_gds_training_split"] = ~held_out
        df.to_csv(scores_output, index=False)
    typer.echo(format_report(report, names))
    if _is_named_set(input) and str(input) in DEMO_SET_NOTES:
        typer.echo(f"note: {DEMO_SET_NOTES[str(input)]}")
    typer.echo(f"wrote {output}", err=True)


@freq_app.command("build")
def freq_build(
    model: str = ModelOpt,
    output: Path = typer.Option(..., "--output", help="the table (.npz)"),
    corpus: List[Path] = typer.Option([], "--corpus", help="corpus file or folder (.txt/.jsonl/.json, optionally .gz); repeatable"),
    more: List[Path] = typer.Argument(None, help="more corpus paths"),
    text_field: str = typer.Option("text", "--text-field", help="field holding the text in .jsonl/.json"),
) -> None:
    """Count token occurrences of a reference corpus with the model's tokenizer."""
    from .frequency import build_frequency_table
    from .loading import load_model

    sources = list(corpus) + list(more or [])
    if not sources:
        _error("give at least one --corpus PATH")
    for path in sources:
        if not path.exists():
            _error(f"corpus path not found: {path}")
    _writable(output)
    lm = load_model(model, device="cpu")  # only the tokenizer and the logits width are used
    from .corpus import iter_corpus_texts

    table = build_frequency_table(lm.tokenizer, iter_corpus_texts(sources, text_field=text_field),
                                  vocab_size=lm.vocab_width, corpus_description=", ".join(map(str, sources)))
    if table.total == 0:
        _error(f"the corpus has no tokens: {', '.join(map(str, sources))}")
    table.save(output)
    typer.echo(f"counted {table.total:,} tokens in {table.n_texts:,} texts → {output}", err=True)


@app.command("datasets")
def list_datasets() -> None:
    """List the built-in labelled sets (usable as --input of mia eval)."""
    from .datasets import list_datasets as sets

    for item in sets():
        typer.echo(f"{item['name']:12s} {item['description']}")


@demo_app.command("build")
def demo_build(
    seed: int = typer.Option(0, "--seed", help="seed of the split, the LoRA initialisation and the data order"),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="default: assets/demo-known (the committed copy)"),
    epochs: int = typer.Option(4, "--epochs"),
    lr: float = typer.Option(1e-3, "--lr"),
) -> None:
    """Rebuild the demo-known adapter from scratch: seeded split, LoRA training on members, manifest."""
    from tqdm.auto import tqdm

    from .demo_known import build_demo
    from .demo_train import LoraSettings

    bar = tqdm(desc="training LoRA on member texts", unit="step", file=sys.stderr)

    def progress(step: int, total: int, loss: float) -> None:
        bar.total = total
        bar.n = step
        bar.set_postfix(loss=f"{loss:.3f}")

    record = build_demo(output_dir, seed=seed, settings=LoraSettings(seed=seed, epochs=epochs, lr=lr), progress=progress)
    bar.close()
    typer.echo(json.dumps(record, indent=1))


@app.command("methods")
def list_methods() -> None:
    """List the available methods and what each needs."""
    from .methods import METHODS

    for spec in METHODS.values():
        params = ", ".join(spec.param_names) or "-"
        typer.echo(f"{spec.name:10s} {spec.label:18s} needs: {'+'.join(spec.needs):24s} params: {params}\n"
                   f"           access: {', '.join(spec.access)}; cost: {spec.cost}\n           {spec.summary}")


def main() -> None:
    """Console entry point: run the app, turning user errors into one line and exit code 2."""
    try:
        app(standalone_mode=False)
    except (_Fail, *USER_ERRORS) as err:
        if os.environ.get("MIA_DEBUG"):
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        typer.echo(f"error: {message}", err=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    except Exception as err:  # click usage errors carry their own exit code
        import click

        if isinstance(err, click.exceptions.ClickException):
            err.show()
            sys.exit(err.exit_code)
        raise


from . import commands  # noqa: E402,F401  (registers the sub-commands of mia_core/commands/)

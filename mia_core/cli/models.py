"""`mia models check SPEC`: what a served model's server exposes, whether its log-probs are repeatable, and which
methods it allows (with the reason for each it does not)."""
from __future__ import annotations

import typer

from ..model.loading import load_model
from ..model.served.check import check_served
from ..model.served.served_model import ServedModel
from ..model.served.spec import is_served_spec
from .app import fail
from .methods import allowed_lines
from .terminal import echo

commands = typer.Typer()
models_app = typer.Typer(no_args_is_help=True, help="Models behind a server: check what one offers before scoring.")
commands.add_typer(models_app, name="models")


@models_app.command("check")
def models_check(spec: str = typer.Argument(..., help="a served model: its URL with settings, e.g. "
                                            "'http://127.0.0.1:8000/v1?model=NAME' "
                                            "(docs: Models, Served models)")) -> None:
    """Probe a served model: server, context, tokenizer, log-probs per position, repeatability, allowed methods."""
    if not is_served_spec(spec):
        fail(f"{spec!r} is not a served model's spec (an http:// or https:// URL); for a model loaded here use "
             "`mia methods --model SPEC`")
    model: ServedModel = load_model(spec)  # type: ignore[assignment]  (a served spec gives a ServedModel)
    report = check_served(model)
    width = max(len(name) for name, _ in report.facts)
    for name, value in report.facts:
        echo(f"{name:{width}s}  {value}")
    echo("\n".join(allowed_lines(model, model.info.name)))
    for warning in report.warnings:
        echo(f"warning: {warning}", err=True)

"""`mia models check SPEC`: what a served model's server exposes, whether its log-probs are repeatable, and which
methods it allows (with the reason for each it does not)."""
from __future__ import annotations

import typer

from ..model.loading import load_model
from ..model.served.check import check_served
from ..model.chat.chat_model import ChatModel
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
    """Probe a served model: server, context, tokenizer, log-probs per position, repeatability, allowed methods.

    A chat API's spec (api=chat) is probed too: the model that answers, its access tier and prices."""
    if not is_served_spec(spec):
        fail(f"{spec!r} is not a served model's spec (an http:// or https:// URL); for a model loaded here use "
             "`mia methods --model SPEC`")
    model = load_model(spec)
    if isinstance(model, ChatModel):  # a chat API: what answered, its tier and prices; no log-prob method runs there
        facts = [("API", model.chat.base_url), ("model (asked)", model.chat.model),
                 ("model (answered)", str(model.answered_model)),
                 ("tier", f"{model.tier.name} ({'with' if model.tier.name == 'GL' else 'no'} log-probs of the "
                          f"generated tokens{f', top {model.tier.k_top}' if model.tier.k_top else ''})"),
                 ("prices", model.prices.words()), ("use it with", "mia extract-books, mia extract")]
        width = max(len(name) for name, _ in facts)
        for name, value in facts:
            echo(f"{name:{width}s}  {value}")
        echo("\n".join(allowed_lines(model, model.chat.model)))
        return
    report = check_served(model)
    width = max(len(name) for name, _ in report.facts)
    for name, value in report.facts:
        echo(f"{name:{width}s}  {value}")
    echo("\n".join(allowed_lines(model, model.info.name)))
    for warning in report.warnings:
        echo(f"warning: {warning}", err=True)

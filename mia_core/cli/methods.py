"""`mia methods`: the registry's methods, what each needs and costs, and which a model allows.

Listing reads the registry only, whose declarations load no model library (`mia_core.deferred`), so it
starts as fast as `mia --help`; `--model` loads the model to ask what it allows.
"""
from __future__ import annotations

from typing import Any, Optional

import typer

from ..api import MethodSpec
from ..methods import METHODS, methods_allowed
from ..model.options import ModelOptions
from .groups import load, option_groups
from .terminal import echo

commands = typer.Typer()


@commands.command("methods")
@option_groups
def list_methods(
    model: Optional[str] = typer.Option(None, "--model", help="list which methods this model allows, and why not the "
                                        "others ('demo', a local folder, a hub id, or a server's URL)"),
    options: ModelOptions = ModelOptions(),
) -> None:
    """List the available methods and what each needs."""
    if model is not None:
        lm = load(model, options)
        echo("\n".join(allowed_lines(lm, f"{model} ({lm.name})" if lm.name != model else model)))
        return
    for spec in METHODS.values():
        echo("\n".join(method_lines(spec)))


def method_lines(spec: MethodSpec) -> list[str]:
    """A method as `mia methods` lists it: label, what it reads of the model and needs, cost, summary, and each
    parameter with its default and help (what `--param NAME=VALUE` sets)."""
    pad = " " * 11
    lines = [f"{spec.name:10s} {spec.label:19s} needs: {' + '.join(spec.needs)}",
             f"{pad}access: {', '.join(spec.access_words())}; cost: {spec.cost}", f"{pad}{spec.summary}"]
    for info in spec.param_infos:
        lines.append(f"{pad}{f'--param {info.name}={info.default}':30s} {info.help}".rstrip())
    if spec.supervised is not None:
        lines.append(f"{pad}supervised: mia fit --method {spec.name} saves a fit (then --param "
                     f"{spec.supervised.fits}=FOLDER), or mia eval --fit FRACTION fits it on a split")
    return lines


def allowed_lines(model: Any, name: str) -> list[str]:
    """Which methods `model` (a `LanguageModel` or its `ModelAccess`) allows, and for each refused one why not."""
    allowed = methods_allowed(model)
    if not allowed.refused:
        return [f"{name} allows every method ({len(allowed.allowed)}): {', '.join(allowed.allowed)}"]
    lines = [f"{name} allows {len(allowed.allowed)} of {len(METHODS)} methods: {', '.join(allowed.allowed) or 'none'}",
             f"refused ({len(allowed.refused)}):"]
    lines += [f"  {method:10s} {why}" for method, why in allowed.refused.items()]
    return lines

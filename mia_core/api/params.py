"""Method parameters: small frozen dataclasses whose fields say their own help and bounds, so the CLI's `--param`
help and every page's widgets are generated from them (declared once, beside the method)."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

import numpy as np

from .score import as_fraction


def param(default: Any, help: str, *, low: float | None = None, high: float | None = None, step: float | None = None,
          choices: tuple | None = None, widget: bool = True) -> Any:
    """A parameter field with its help and, for the widgets, its bounds (`low`, `high`, `step`) or its `choices`.

    `widget=False` keeps it off the pages (set from the CLI or Python only, e.g. a seed of a sampled method).
    """
    meta = {"help": help, "low": low, "high": high, "step": step, "choices": choices, "widget": widget}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class ParamInfo:
    """One parameter as the CLI and the pages show it."""

    name: str
    default: Any
    kind: type
    help: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple | None = None
    widget: bool = True


def param_infos(params: type) -> list[ParamInfo]:
    """Every field of a parameters dataclass with its help and bounds (a field without `param` has only its type)."""
    out = []
    hints = typing.get_type_hints(params)
    for f in dataclasses.fields(params):
        meta = dict(f.metadata)
        kind = type(f.default) if f.default is not dataclasses.MISSING and f.default is not None else \
            _declared_kind(hints.get(f.name))
        out.append(ParamInfo(f.name, f.default, kind, meta.get("help", ""), meta.get("low"), meta.get("high"),
                             meta.get("step"), meta.get("choices"), meta.get("widget", True)))
    return out


def _declared_kind(hint: Any) -> type:
    """The type a field without a default value to read it from declares (`int | None` → int); str when unsure."""
    kinds = [k for k in typing.get_args(hint) if k is not type(None)] if typing.get_args(hint) else [hint]
    return kinds[0] if len(kinds) == 1 and isinstance(kinds[0], type) else str


def is_int(value) -> bool:
    """An integer that is not a bool (True would otherwise count as 1): parameter checks share it."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class NoParams:
    """Methods without tunable parameters."""


@dataclass(frozen=True)
class KParams:
    """Parameters of a method that averages the lowest k% of its token scores (k validated here, once)."""

    k: float = param(0.2, "fraction of tokens (lowest scores) averaged; n = max(1, floor(k · n_scored))",
                     low=0.05, high=1.0, step=0.05)

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", as_fraction(self.k))  # checked; one float for every form (`as_fraction`)

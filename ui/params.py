"""Method parameters on the pages, drawn from each chosen method's parameters dataclass (`MethodSpec.param_infos`).

A bounded fraction is a slider (a number box when its default is None: unset), a whole or unbounded number a number
box, a parameter with `choices` a select box, a flag a checkbox; `widget=False` parameters (seeds, model names) stay
off the pages (CLI and Python only). A parameter several chosen methods take (k) is drawn once, as "k: used by Min-K%,
Min-K%++", with bounds and choices that suit every one of them; widget keys are `{key_prefix}_{name}` (`explore_k`,
`bench_n_shots`, …).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import streamlit as st

from mia_core.api import KParams, ParamInfo, get_method

#: Where a page's one widget for a parameter starts when the methods' own defaults differ: k at the min-k% family's
#: 0.2 (SURP's own is 0.4), as every page's k slider always started.
PAGE_DEFAULTS = {"k": KParams().k}


@dataclass(frozen=True)
class Shared:
    """One parameter name as the chosen methods take it: `info` merged over them (None: they cannot share one value,
    e.g. their choices differ), the methods and each one's own default."""

    name: str
    info: ParamInfo | None
    methods: tuple[str, ...]
    defaults: dict[str, Any]

    @property
    def labels(self) -> str:
        return ", ".join(get_method(m).label for m in self.methods)


def merge(infos: list[ParamInfo], labels: list[str]) -> ParamInfo | None:
    """One widget's info for a parameter several methods take: bounds and choices that suit all of them, the page's
    start value (or the first method's default); None when no one value suits all."""
    kinds = {i.kind for i in infos}
    kind = kinds.pop() if len(kinds) == 1 else None  # e.g. GDS's alpha (an int) is not PAC's (a fraction)
    choices = infos[0].choices
    if any(i.choices != choices for i in infos):  # e.g. Neighbourhood's aggregate (mean|max) is not grad_norm's
        return None
    lows = [i.low for i in infos if i.low is not None]
    highs = [i.high for i in infos if i.high is not None]
    low, high = (max(lows) if lows else None), (min(highs) if highs else None)
    if kind is None or (low is not None and high is not None and low > high):
        return None
    helps = list(dict.fromkeys(i.help for i in infos))
    help_ = helps[0] if len(helps) == 1 else "; ".join(f"{label}: {i.help}" for label, i in zip(labels, infos))
    default = PAGE_DEFAULTS.get(infos[0].name, infos[0].default)
    if choices is not None and default not in choices:
        default = choices[0]
    return replace(infos[0], default=default, kind=kind, help=help_, low=low, high=high, choices=choices)


def shared_params(methods: Sequence[str]) -> list[Shared]:
    """The parameters the methods offer on the pages, each name once, in the order the methods declare them."""
    taking: dict[str, list[tuple[str, ParamInfo]]] = {}
    for method in methods:
        for info in get_method(method).param_infos:
            if info.widget:
                taking.setdefault(info.name, []).append((method, info))
    out = []
    for name, pairs in taking.items():
        names, infos = [m for m, _ in pairs], [i for _, i in pairs]
        out.append(Shared(name, merge(infos, [get_method(m).label for m in names]), tuple(names),
                          {m: i.default for m, i in pairs}))
    return out


def merged(name: str, methods: Sequence[str]) -> ParamInfo | None:
    """The widget info of parameter `name` over those of `methods` that take it (the URL state reads its bounds)."""
    return next((s.info for s in shared_params(methods) if s.name == name), None)


def param_widget(box, shared: Shared, key: str) -> Any:
    """Draw one parameter's widget in `box` (a container or `st`); its value."""
    info = shared.info
    label, help_ = f"{shared.name}: used by {shared.labels}", info.help or None
    if info.choices is not None:
        return box.selectbox(label, info.choices, index=info.choices.index(info.default), key=key, help=help_)
    if info.kind is bool:
        return box.checkbox(label, value=bool(info.default), key=key, help=help_)
    if info.kind is str:
        return box.text_input(label, value=str(info.default or ""), key=key, help=help_)
    whole = info.kind is int
    cast = int if whole else float
    low, high = (None if b is None else cast(b) for b in (info.low, info.high))
    step = cast(info.step) if info.step is not None else (1 if whole else None)
    if not whole and low is not None and high is not None and step is not None and info.default is not None:
        return box.slider(label, low, high, cast(info.default), step, key=key, help=help_)
    # None: the method's own rule (Infilling's m) or a plug-in left off (PDR's pdr_alpha): a box that may stay empty
    value = None if info.default is None else cast(info.default)
    return box.number_input(label, low, high, value, step, key=key, help=help_,
                            placeholder="the method's own rule" if value is None else None)


def param_widgets(methods: Sequence[str], key_prefix: str, container=None, *,
                  ask: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Draw the methods' parameters (each name once) in `container`; {method: {parameter: value}} of those drawn
    (a method keeps its own default for the others).

    ask : names drawn only once asked for ("One k for every method that takes one"); until then each method keeps its
        own default, said in a caption.
    """
    box = st if container is None else container
    values: dict[str, dict[str, Any]] = {m: {} for m in methods}
    for shared in shared_params(methods):
        key = f"{key_prefix}_{shared.name}"
        if shared.info is None:
            box.caption(f"{shared.name}: each method keeps its own default ({own_defaults(shared)}): no one value "
                        "suits all of them.")
            continue
        if shared.name in ask and not box.toggle(f"One {shared.name} for every method that takes one",
                                                 key=f"{key}_same"):
            box.caption(f"{shared.name}: each method's own default — {own_defaults(shared)}.")
            continue
        value = param_widget(box, shared, key)
        for method in shared.methods:
            values[method][shared.name] = value
    return values


def own_defaults(shared: Shared) -> str:
    """"SURP 0.4, Min-K% Prob 0.2": each method's own default of a parameter."""
    return ", ".join(f"{get_method(m).label} {shown(v)}" for m, v in shared.defaults.items())


def shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def flat(values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One value per parameter name (a name drawn once has one value), in the order drawn: for stamps and captions."""
    return {name: value for per_method in values.values() for name, value in per_method.items()}


def changed(values: dict[str, dict[str, Any]], keep: Sequence[str] = ()) -> dict[str, Any]:
    """The values a run must be given: those that differ from the own default of a method taking them, and the names
    in `keep` (set on purpose, e.g. through "One k for every method"); the run's record then lists only these."""
    out = {}
    for method, per_method in values.items():
        defaults = {i.name: i.default for i in get_method(method).param_infos}
        for name, value in per_method.items():
            if name in keep or value != defaults.get(name):
                out[name] = value
    return out

"""What each place supplies, declared once, and the page widgets kept in the URL with their options and bounds.

A place (Explore, Benchmark, the audits, the `mia` command) supplies some of the needs a method may have
(`mia_core.api.NEEDS`); the methods it offers are the registered ones whose needs it meets, read from the registry
on every call (a method registered later shows up). The pages list their methods from here, Home's methods table
ticks where each runs, and the URL state (`ui.query_state`) checks a link's values against the same options and
bounds the widgets are drawn with (a method parameter's from its `param_infos`, through `ui.params`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mia_core import datasets
from mia_core.api import HELPER_NEEDS, MODEL_NEEDS, NEEDS, MethodSpec, get_method
from mia_core.methods import METHODS
from ui.params import merged


@dataclass(frozen=True)
class Place:
    """Where methods run: the needs it supplies; `fits`: also what a supervised method fits (its `Supervised.fits`),
    fitted on the Benchmark page or given to `mia`."""

    column: str
    supplies: tuple[str, ...]
    fits: bool = False

    def offers(self, spec: MethodSpec) -> bool:
        """Whether the place can supply everything the method needs."""
        unmet = set(spec.needs) - set(self.supplies)
        return not unmet or (self.fits and spec.supervised is not None and unmet == {spec.supervised.fits})

    def methods(self) -> list[str]:
        """The registered methods it offers, in registry order."""
        return [name for name, spec in METHODS.items() if self.offers(spec)]

    def stats_only(self) -> list[str]:
        """Those that need nothing but the target's statistics (cheap to redraw)."""
        return [name for name in self.methods() if METHODS[name].stats_only]


#: Explore and Benchmark run the target again and take helper texts; supervised methods are fitted on Benchmark
#: (Explore offers them once fitted there).
EXPLORE = Place("Explore", (*MODEL_NEEDS, *HELPER_NEEDS), fits=True)
BENCHMARK = Place("Benchmark", (*MODEL_NEEDS, *HELPER_NEEDS), fits=True)
#: The audits score every snippet, chunk or window with one pass of the model.
AUDITS = Place("Audits (books, unlearning, long texts)", ("stats",))
#: `mia` takes a reference model, a frequency table and a fitted classifier too.
CLI = Place("CLI (mia)", tuple(NEEDS), fits=True)
PLACES = (EXPLORE, BENCHMARK, AUDITS, CLI)
#: Session key of the supervised methods fitted on the Benchmark page ({"model": spec, "methods": {name: fit}}),
#: which Explore offers for that model.
FITTED = "supervised_fits"


@dataclass(frozen=True)
class Field:
    """A widget key kept in the URL on its page (the page's url path): one of `options` (or, `many`, a list of at
    most `most` of them), or a number in [low, high] of `kind`. The page's widget is drawn with these same options
    and bounds, so a value read back never makes the widget raise."""

    page: str
    key: str
    options: tuple[Any, ...] = ()
    most: int | None = None
    low: float = -math.inf
    high: float = math.inf
    kind: type = str
    many: bool = False

    def read(self, values: list[str]) -> Any:
        """The value for session state, or None when `values` are not valid for the widget."""
        if self.many:
            ok = all(v in self.options for v in values) and len(set(values)) == len(values)
            return list(values) if ok and (self.most is None or len(values) <= self.most) else None
        if len(values) != 1:
            return None
        if self.options:
            return values[0] if values[0] in self.options else None
        try:
            value = self.kind(values[0])  # int("1.5") fails: an int field takes whole numbers only
        except ValueError:
            return None
        return value if math.isfinite(value) and self.low <= value <= self.high else None


def one_of(page: str, key: str, options: list[str] | tuple[str, ...]) -> Field:
    """A radio or selectbox."""
    return Field(page, key, tuple(options))


def some_of(page: str, key: str, options: list[str], most: int | None = None) -> Field:
    """A multiselect (`most`: its max_selections)."""
    return Field(page, key, tuple(options), most, many=True)


def number(page: str, key: str, low: float, high: float, kind: type = float) -> Field:
    """A number input or slider."""
    return Field(page, key, low=low, high=high, kind=kind)


def param_field(page: str, prefix: str, name: str, methods: list[str]) -> Field | None:
    """A method parameter's widget (`ui.params`, key `{prefix}_{name}`) with the bounds or choices it is drawn with."""
    info = merged(name, methods)
    if info is None:
        return None
    key = f"{prefix}_{name}"
    if info.choices is not None:
        return one_of(page, key, tuple(str(c) for c in info.choices))
    return number(page, key, -math.inf if info.low is None else info.low, math.inf if info.high is None else info.high,
                  info.kind)


#: Statistics-only methods Explore shows side by side.
SIDE_BY_SIDE = 2
EXPLORE_BOS = one_of("explore", "explore_bos", ("auto", "none"))
BENCH_SOURCE = one_of("benchmark", "bench_source", ("Built-in demo set", "Upload CSV/JSONL", "Hub benchmark (online)"))
BENCH_N = number("benchmark", "bench_n", 5, 240, int)
AUDIT_WORDS = number("audit", "audit_words", 16, 4096, int)
UNLEARN_SOURCE = one_of("unlearning", "unlearn_source", ("mine", "demo"))
UNLEARN_WORDS = number("unlearning", "unlearn_words", 8, 4096, int)
ONLINE_SOURCE = one_of("online", "online_source", ("text", "passages", "demo"))


def dataset_names() -> list[str]:
    return [d["name"] for d in datasets.list_datasets()]


def kept_fields() -> tuple[Field, ...]:
    """The pages' widget keys kept in the URL, with the options and bounds of their widgets (a test checks them
    against the pages); methods as the registry has them now."""
    audits = AUDITS.methods()
    fields = (
        some_of("explore", "explore_methods", EXPLORE.stats_only(), SIDE_BY_SIDE),
        param_field("explore", "explore", "k", EXPLORE.methods()),
        EXPLORE_BOS,
        BENCH_SOURCE,
        one_of("benchmark", "bench_set", dataset_names()),
        BENCH_N,
        some_of("benchmark", "bench_methods", BENCHMARK.methods()),
        one_of("audit", "audit_method", audits),
        AUDIT_WORDS,
        UNLEARN_SOURCE,
        one_of("unlearning", "unlearn_method", audits),
        UNLEARN_WORDS,
        ONLINE_SOURCE,
        one_of("online", "online_method", audits),
    )
    return tuple(f for f in fields if f is not None)


def label(method: str) -> str:
    """A method as people see it in pickers."""
    return get_method(method).label

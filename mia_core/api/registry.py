"""The method registry: `register` adds a method, declared whole, to `METHODS`; the rest of the code asks it.

Every method maps `TokenStats` (plus whatever else it `needs`) to a `Score` whose value is oriented **higher =
more likely a member** (docs/methods.md, "Orientation"). Pages, the CLI, reports and tests ask the registry
(`methods_for`, `methods_allowed`, `get_method`); none keeps a table of its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..names import unknown_name
from .access import FULL_ACCESS, AccessNeeds, ModelAccess, refusal
from .method import LESSON_STAGES, NEEDS, MethodSpec, Paper, Supervised, TokenView
from .params import NoParams
from .score import Score

METHODS: dict[str, MethodSpec] = {}


def register(name: str, *, label: str, summary: str, reading: Callable[[float], str], formula: str, idea: str,
             access: AccessNeeds, view: TokenView, params: type = NoParams, needs: tuple[str, ...] = ("stats",),
             token_level: bool = True, cost: str = "1 forward pass", prepare: Callable[..., Any] | None = None,
             supervised: Supervised | None = None, extra_passes: Callable[[Any], float] = lambda params: 0,
             paper: Paper | None = None, fails: str = "", lesson: int = 0, batch: Callable[..., Any] | None = None):
    """Decorator adding a scorer `fn(stats, params, **inputs) -> Score` to `METHODS`, with all it declares.

    `access` says what it reads of the model, `view` how its token scores read, `cost` its relative cost in
    forward/backward passes (shown next to it in method lists), `extra_passes(params)` the same as a number: the
    passes over a text's tokens it adds to the statistics pass (0: it reads the statistics). `paper`, `fails` (when it
    fails, from the literature) and `lesson` (its place in the teaching order, `LESSON_STAGES`) are what Learn shows.
    `reading`, `formula`, `idea`, `access`, `view`, `paper`, `fails` and `lesson` have no usable default: a method is
    registered whole or not at all. `batch` is the optional batch form of a method that reads only what it is given
    (`MethodSpec.batch`).
    """
    unknown = set(needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown needs {sorted(unknown)}; known: {sorted(NEEDS)}")
    if not (formula.strip() and idea.strip() and callable(reading)):
        raise ValueError(f"method {name!r} needs a formula, an idea and a reading")
    if not isinstance(access, AccessNeeds) or not isinstance(view, TokenView):
        raise TypeError(f"method {name!r}: access must be an AccessNeeds and view a TokenView")
    if not isinstance(paper, Paper) or not fails.strip():
        raise ValueError(f"method {name!r} needs its paper (a Paper) and when it fails (a sentence)")
    if isinstance(lesson, bool) or not isinstance(lesson, int) or lesson // 100 not in LESSON_STAGES:
        raise ValueError(f"method {name!r}: lesson must be an integer in a stage's hundred {sorted(LESSON_STAGES)} "
                         f"(got {lesson!r})")
    if supervised is not None and supervised.fits not in needs:
        raise ValueError(f"method {name!r}: what it fits ({supervised.fits!r}) must be one of its needs")
    if batch is not None and (prepare is not None or supervised is not None):
        raise ValueError(f"method {name!r}: a batch form is for methods that read only what they are given")

    def wrap(fn: Callable[..., Score]) -> Callable[..., Score]:
        METHODS[name] = MethodSpec(name, fn, params, tuple(needs), label, summary, token_level, access, cost, reading,
                                   formula, idea, view, prepare, supervised, extra_passes, paper, fails, lesson, batch)
        return fn

    return wrap


def methods_for(available: tuple[str, ...] | set[str] = tuple(NEEDS), *, token_level: bool | None = None) -> list[str]:
    """Registered methods whose needs are all in `available` (e.g. `("stats",)`: one pass of the target suffices)."""
    return [name for name, spec in METHODS.items()
            if set(spec.needs) <= set(available) and (token_level is None or spec.token_level == token_level)]


def teaching_order() -> list[str]:
    """Registered methods in the order Learn teaches them (by `lesson`; docs/methods.md, "Teaching order")."""
    return sorted(METHODS, key=lambda name: METHODS[name].lesson)


def stats_only_methods() -> list[str]:
    """Methods that need nothing but the target's statistics (cheap to redraw; usable per snippet, chunk or window)."""
    return methods_for(("stats",))


@dataclass(frozen=True)
class Allowed:
    """The methods a model allows, in registry order, and for each one it refuses the sentence that says why."""

    allowed: list[str]
    refused: dict[str, str]


def model_access(model: Any) -> ModelAccess:
    """What a model offers: its `access` (a `ModelAccess`), or a `ModelAccess` given as such."""
    if isinstance(model, ModelAccess):
        return model
    return getattr(model, "access", FULL_ACCESS)


def methods_allowed(model: Any, methods: list[str] | None = None) -> Allowed:
    """Which of `methods` (default: all) the model's access allows, and why not the others."""
    offer = model_access(model)
    allowed, refused = [], {}
    for name in (list(METHODS) if methods is None else methods):
        spec = get_method(name)
        why = refusal(offer, spec.access, spec.label)
        if why is None:
            allowed.append(name)
        else:
            refused[name] = why
    return Allowed(allowed, refused)


def get_method(name: str) -> MethodSpec:
    """The registered method, or a KeyError naming the closest ones and listing the available names."""
    try:
        return METHODS[name]
    except KeyError:
        raise KeyError(unknown_name("method", name, sorted(METHODS))) from None


def reading(name: str, value: float) -> str:
    """One sentence on a sequence score, ending with the caveat that matters: compare, don't conclude."""
    base = get_method(name).reading(value)
    return (f"{base[0].upper()}{base[1:]} Higher = more member-like; on its own a score is not evidence — "
            "compare it with texts of known membership.")

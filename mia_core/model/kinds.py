"""Model kinds, registered like methods: each kind of model says how its spec is recognised, what access it offers (in
words, for docs and `mia models`) and how it loads. `load_model` asks this registry; nothing outside a kind's own
module branches on its name. A new backend is one module in `mia_core.model.backends` that calls `register_kind`, its
import in that package's `__init__`, and a test (docs: Architecture, "How to add a model backend")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class LoadOptions:
    """How a model is loaded, for the kinds that load weights here (served and chat kinds read `max_length` only)."""

    device: str = "auto"
    dtype: Any = "auto"
    trust_remote_code: bool = False
    allow_pickle: bool = False
    max_length: int | None = None
    max_memory: str | dict | None = None


@dataclass(frozen=True)
class ModelKind:
    """One kind of model: its name, what it is and offers (words), how a spec of it is recognised, how it loads."""

    name: str
    describes: str
    """What the kind is, e.g. "a server's URL with settings (vLLM, SGLang, OpenAI-compatible)"."""
    offers: str
    """The access it offers, in words (the loaded model's `access` says it exactly)."""
    recognises: Callable[[str], bool]
    load: Callable[[str, LoadOptions], Any]
    fallback: bool = False
    """The kind of every spec no other kind recognises (one kind only: local folders and hub ids)."""


KINDS: dict[str, ModelKind] = {}


def register_kind(kind: ModelKind) -> ModelKind:
    """Add a kind (its name unique; at most one fallback)."""
    if kind.name in KINDS:
        raise ValueError(f"a model kind named {kind.name!r} is registered already")
    if kind.fallback and any(k.fallback for k in KINDS.values()):
        raise ValueError("only one model kind may take the specs no other kind recognises")
    KINDS[kind.name] = kind
    return kind


def kind_of(spec: str) -> ModelKind:
    """The kind whose `recognises` accepts `spec` (the fallback kind when none does)."""
    for kind in KINDS.values():
        if not kind.fallback and kind.recognises(spec):
            return kind
    fallback = next((k for k in KINDS.values() if k.fallback), None)
    if fallback is None:
        raise ValueError(f"no model kind recognises {spec!r}; kinds: {', '.join(KINDS)}")
    return fallback

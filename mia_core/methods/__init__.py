"""Membership-inference methods; importing this package registers every method module in `METHODS`.

Every module of this package is imported here (the registry itself lives in `mia_core.api`), so a new method is one new file
with an `@register` decorator (no list to edit).
"""
import importlib
import pkgutil

from ..api import (
    METHODS, NEEDS, KParams, MethodSpec, Score, get_method, methods_allowed, methods_for, reading, register,
    stats_only_methods,
)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["METHODS", "NEEDS", "KParams", "MethodSpec", "Score", "get_method", "methods_allowed", "methods_for",
           "reading", "register", "stats_only_methods"]

"""Membership-inference methods; importing this package registers every method module in `METHODS`.

Every module of this package except the registry is imported here, so a new method is one new file
with an `@register` decorator (no list to edit).
"""
import importlib
import pkgutil

from .registry import (
    METHODS, NEEDS, KParams, MethodSpec, Score, get_method, methods_for, reading, register, stats_only_methods,
)

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module != "registry":
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["METHODS", "NEEDS", "KParams", "MethodSpec", "Score", "get_method", "methods_for", "reading", "register",
           "stats_only_methods"]

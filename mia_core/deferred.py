"""A module imported the first time one of its names is read: what a method declares loads no torch.

The method registry is read by `mia methods`, `mia --help`-speed listings and the Learn page; a method's
declaration (name, parameters, label, formula, …) needs no model library, but its engine does. A method
module binds its engine with `deferred`, beside an `if TYPE_CHECKING:` import of the same module (so the
import graph and type checkers still see the edge):

    if TYPE_CHECKING:
        from . import engine
    else:
        engine = deferred(f"{__name__}.engine")

`importlib.import_module` does the import, under Python's import lock: two threads reading a name at once get
the same, fully executed module.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class DeferredModule:
    """Stands for the module `name` until a name is read from it; then every read goes to the imported module."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_name", name)

    def _module(self) -> ModuleType:
        return importlib.import_module(self._name)

    @property
    def __dict__(self) -> dict[str, Any]:  # type: ignore[override]
        """The module's names (what `vars()` and pytest's monkeypatch read to restore a patched name)."""
        return vars(self._module())

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._module(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        """Names set go to the module itself (a test's monkeypatch patches what the module's functions read)."""
        setattr(self._module(), attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._module(), attr)

    def __repr__(self) -> str:
        return f"<deferred module {self._name!r}>"


def deferred(name: str) -> DeferredModule:
    """The module `name`, imported on first use."""
    return DeferredModule(name)

"""Messages for unknown names (methods, datasets, options) that suggest the closest valid ones."""
from __future__ import annotations

import difflib
from typing import Iterable


def unknown_name(kind: str, name: object, known: Iterable[str]) -> str:
    """"unknown method 'min_kk'; did you mean 'min_k', 'min_k_pp'? (available: …)" for a name not in `known`."""
    known = [str(k) for k in known]
    close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}{hint} (available: {', '.join(known)})"


def check_choice(kind: str, value: object, known: Iterable[str]) -> None:
    """ValueError with a "did you mean" hint unless `value` is one of `known`."""
    known = tuple(known)
    if value not in known:
        raise ValueError(unknown_name(kind, value, known))

"""What a page request will cost the model, told before it runs: its tokens × the model passes of its methods.

The statistics pass is counted once (every statistics-only method reads it); a method that runs the model again
adds its own passes, from its parameters (Neighbor's n_neighbors, PaC's n_augment, …), a backward pass counted as
two forward ones. The estimate is what `mia_core.limits.check_request_cost` bounds (a CPU request less than a GPU's).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import streamlit as st

import mia_core
from mia_core.api.params import param_infos
from mia_core.limits import token_pass_bound
from ui.models import cached_model

#: Infilling's m when left to the method (None): 1 for texts of ≤ 32 tokens, else 5 (counted as 5).
INFILLING_AUTO_M = 5
#: Passes a method adds to the statistics pass, from its parameters (a method not named here adds none: it reads
#: the statistics, or statistics of another model or a table built once).
EXTRA_PASSES: dict[str, Callable[[Mapping[str, Any]], float]] = {
    "lowercase": lambda p: 1,
    "recall": lambda p: 1,
    "con_recall": lambda p: 2,
    "neighbor": lambda p: int(p["n_neighbors"]) + 1,  # the neighbours, and the pass that proposes them
    "pac": lambda p: int(p["n_augment"]),
    "infilling": lambda p: (p["m"] or INFILLING_AUTO_M) + 1,
    "grad_norm": lambda p: 3,  # a forward and a backward pass (≈ two forward ones)
    "gds": lambda p: 3,
    "samia": lambda p: int(p["n_samples"]),  # generations about as long as the text's second half, token by token
}


def extra_passes(method: str, params: Mapping[str, Any] | None = None) -> float:
    """The model passes `method` adds to the statistics pass under these parameters (their defaults where not given)."""
    if method not in EXTRA_PASSES:
        return 0
    given = {i.name: i.default for i in param_infos(mia_core.METHODS[method].params)} | dict(params or {})
    return EXTRA_PASSES[method](given)


def request_passes(methods: Sequence[str], values: Mapping[str, Mapping[str, Any]] | None = None) -> int:
    """Passes over every token of a request: the statistics pass, plus what each chosen method adds."""
    values = values or {}
    return 1 + round(sum(extra_passes(m, values.get(m)) for m in methods))


@st.cache_data(show_spinner=False, max_entries=64)
def count_tokens(spec: str, texts: tuple[str, ...], bos: str = "auto") -> int:
    """Tokens the model is fed for these texts (tokenising only: milliseconds, no model pass)."""
    lm = cached_model(spec)
    return sum(len(lm.fed_ids(t, bos)) for t in texts)


def device_type(spec: str) -> str:
    """Where the model computes: "cpu", "cuda", … (the bound on a request depends on it)."""
    return cached_model(spec).device.type


def estimate_line(tokens: int, passes: int, device: str) -> str:
    """"≈ 12,000 tokens × 2 passes = 24,000 token-passes, of the 50,000 one request may cost on this CPU server"."""
    bound = token_pass_bound(device)
    where = "CPU" if device == "cpu" else "GPU"
    over = " — over the bound: it will not run here" if tokens * passes > bound else ""
    return (f"Estimated cost: ≈ {tokens:,} tokens × {passes} pass{'es' if passes != 1 else ''} = "
            f"{tokens * passes:,} token-passes, of the {bound:,} one request may cost on this server's {where}{over}.")

"""What a page request will cost the model, told before it runs: its tokens × the model passes of its methods.

The statistics pass is counted once (every statistics-only method reads it); a method that runs the model again
adds the passes its registration declares (`extra_passes`, from its parameters: Neighbor's n_neighbors, PaC's
n_augment, …; a backward pass counted as two forward ones). The estimate is what `mia_core.limits.check_request_cost` bounds (a CPU request less than a GPU's).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import streamlit as st

import mia_core
from mia_core.api.params import param_infos
from mia_core.limits import bound_place, token_pass_bound
from mia_core.model.served.served_model import answer_size_words
from ui.models import cached_model

def extra_passes(method: str, params: Mapping[str, Any] | None = None) -> float:
    """The model passes `method` adds to the statistics pass under these parameters (their defaults where not given),
    as its registration declares (`extra_passes`)."""
    spec = mia_core.METHODS[method]
    given = {i.name: i.default for i in param_infos(spec.params)} | dict(params or {})
    return spec.extra_passes(SimpleNamespace(**given))


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


def answer_bytes(spec: str) -> float:
    """Bytes a served model's server sends back per scored token (0 for a model computed here)."""
    return float(getattr(cached_model(spec), "answer_bytes_per_token", 0.0))


def estimate_line(tokens: int, passes: int, device: str, answer_bytes_per_token: float = 0.0) -> str:
    """"≈ 12,000 tokens × 2 passes = 24,000 token-passes, of the 50,000 one request may cost on this server's CPU",
    and for a server that sends the whole distribution back (logprobs=full), how much that is."""
    bound = token_pass_bound(device)
    over = " — over the bound: it will not run here" if tokens * passes > bound else ""
    line = (f"Estimated cost: ≈ {tokens:,} tokens × {passes} pass{'es' if passes != 1 else ''} = "
            f"{tokens * passes:,} token-passes, of the {bound:,} one request may cost on {bound_place(device)}{over}.")
    if size := answer_size_words(answer_bytes_per_token, tokens, "this request"):
        line += f" {size[0].upper()}{size[1:]}."
    return line

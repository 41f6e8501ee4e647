"""The chosen model and a few page settings in the address bar, so they survive a reload or a shared link.

`restore` runs before the picker and the page: a value in the URL that this session did not write itself
(a first visit, a reload, a link from Home) is checked and put into session state, where the widget with that
key picks it up; a bad value (an unknown choice, a number out of range, a list too long) is ignored, never a
traceback. A hub id or folder from a link goes into the model box, to be confirmed (ui.models), never loaded
silently. `save` runs after the page and writes the current values back: the model everywhere, a page's
settings on that page only. Other parameters (`?run=` of the Book audit) are left alone. Which keys are kept, and
the options and bounds a value must have, are declared with the pages' places (`ui.places.kept_fields`).
"""
from __future__ import annotations

from typing import Any

import streamlit as st

from ui.models import BUILT_IN, UNCONFIRMED
from ui.places import kept_fields

#: Query parameters of the model: the picker's choice, and the hub id or folder when it is "other".
MODEL, PATH = "model", "path"
#: The session's last written parameters: a URL value equal to it is the session's own, not an instruction.
WRITTEN = "query_written"


def url_values(key: str) -> list[str]:
    """Every value of `key` in the URL (a list field repeats its key)."""
    return st.query_params.get_all(key)


def restore() -> None:
    """Before any widget: URL values the session did not write itself, checked, into session state."""
    written = st.session_state.get(WRITTEN, {})
    fields = kept_fields()
    fresh = {key for key in {MODEL, PATH, *(f.key for f in fields)}
             if url_values(key) and url_values(key) != written.get(key)}
    if MODEL in fresh or PATH in fresh:
        restore_model(url_values(MODEL), url_values(PATH))
    for field in fields:
        if field.key in fresh and (value := field.read(url_values(field.key))) is not None:
            st.session_state[field.key] = value


def restore_model(model: list[str], path: list[str]) -> None:
    """A built-in is chosen; another model's name (or a served model's URL) is put in its box, to be confirmed
    before it loads."""
    if model == ["served"] and len(path) == 1 and path[0].strip():
        spec = path[0].strip()
        st.session_state["model_choice"] = "served"
        if spec != st.session_state.get("model_served", "").strip():
            st.session_state["model_served"] = spec
            st.session_state[UNCONFIRMED] = spec
        return
    if model == ["other"] and len(path) == 1 and path[0].strip():
        spec = path[0].strip()
        if spec in BUILT_IN and spec != "other":
            st.session_state["model_choice"] = spec
            return
        st.session_state["model_choice"] = "other"
        if spec != st.session_state.get("model_other", "").strip():  # the model already chosen needs no confirming
            st.session_state["model_other"] = spec
            st.session_state[UNCONFIRMED] = spec
    elif len(model) == 1 and model[0] in BUILT_IN and model[0] != "other":
        st.session_state["model_choice"] = model[0]


def current(page: str) -> dict[str, list[str]]:
    """The parameters this run stands for: the model, and this page's settings as they are now."""
    params: dict[str, list[str]] = {}
    choice_now = st.session_state.get("model_choice")
    if choice_now in BUILT_IN:
        params[MODEL] = [choice_now]
        box = {"other": "model_other", "served": "model_served"}.get(choice_now)
        typed = str(st.session_state.get(box) or "").strip() if box else ""
        if typed:
            params[PATH] = [typed]
    for field in kept_fields():
        if field.page == page and field.key in st.session_state:
            params[field.key] = as_strings(st.session_state[field.key])
    return params


def as_strings(value: Any) -> list[str]:
    """A widget value as URL strings: a list repeats, a float loses trailing zeros."""
    values = value if isinstance(value, (list, tuple)) else [value]
    return [f"{v:g}" if isinstance(v, float) else str(v) for v in values]


def save(page: str) -> None:
    """After the page: the URL says what this run stands for (only parameters that changed are sent)."""
    params = {key: values for key, values in current(page).items() if values}  # an empty list: no parameter
    for key, values in params.items():
        if url_values(key) != values:
            st.query_params[key] = values if len(values) > 1 else values[0]
    for key in {MODEL, PATH, *(f.key for f in kept_fields())} - set(params):
        if key in st.query_params:
            del st.query_params[key]
    st.session_state[WRITTEN] = params

"""The sidebar model picker shared by every page, and the cached model and statistics.

The picker only records the choice (`model_spec` in session state) so the page paints at once; the model
is loaded under a sidebar status after the page ran (or earlier by a page that needs it, through
`cached_model`). A spec that failed to load is remembered for the session and not retried on every rerun.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

import streamlit as st
from streamlit.elements.lib.mutable_status_container import StatusContainer

import mia_core
from mia_core import LanguageModel, TokenStats
from mia_core.api import Allowed, methods_allowed
from mia_core.model.chat.chat_model import ChatModel
from mia_core.model.chat.spec import is_chat_spec
from mia_core.model.served.spec import is_served_spec, parse_served_spec
from ui.jobs import public_message
from ui.markdown import md
from ui.model_work import model_slot, watch_layers
from ui.places import label

BUILT_IN = {
    "demo": "SmolLM2-135M — embedded, offline",
    "demo-known": "SmolLM2-135M + demo-known adapter (knows the demo members)",
    "other": "Another model: hub id or local folder",
    "served": "A served model: vLLM or an OpenAI-compatible server",
    "chat": "A chat API: generated text only (GPT, Claude, Gemini …)",
}
#: What the served model's box shows before anything is typed (docs: Models, "Served models").
SERVED_EXAMPLE = "http://127.0.0.1:8000/v1?model=NAME"
#: What the chat API's box shows (docs: Chat APIs).
CHAT_EXAMPLE = "https://api.openai.com/v1?api=chat&model=NAME&key_env=OPENAI_API_KEY&price_in=2&price_out=8"
#: The picker's widgets keep their values for the whole session, whatever Streamlit's cleanup drops (`chosen_spec`).
SESSION = "session"
#: Set to 1 by an operator who lets the dashboard's visitors use API keys from its environment (docs: Security).
SERVED_KEYS_ENV = "MIA_LENS_SERVED_KEYS"
#: Session keys: specs that failed to load (spec → message), the spec known loaded, a spec from a link to confirm.
FAILED, LOADED, UNCONFIRMED = "model_failed", "model_loaded", "model_unconfirmed"
#: Session key: (spec, its sidebar status) while this run has not said the chosen model is loaded.
PENDING = "model_status_pending"


@st.cache_resource(show_spinner=False, max_entries=3)
def shared_model(spec: str) -> LanguageModel:
    """One loaded model per spec for the whole server (models are large; never copy them); a page request's work on
    it stops before any layer once its session ended (`ui.model_work.watch_layers`)."""
    lm = mia_core.load_model(spec)
    if lm.model is not None:  # a served model has no layers here: its requests stop with the run
        watch_layers(lm.model)
    return lm


class NotForThisPage(Exception):
    """The chosen model cannot serve this page: a chat API, which only generates text, on a page that reads log-probs
    (app.py shows the message instead of the page)."""


#: What a log-prob page says when a chat API is chosen.
CHAT_ONLY = ("The chosen model is a chat API: it only generates text, so this page, which reads log-probs, cannot use "
             "it. Open **Extract books from a chat API** or **DE-COP quiz on a chat API**, or choose another model in "
             "the sidebar.")


def cached_model(spec: str) -> LanguageModel:
    """The chosen model for a page that reads log-probs (`loaded_model`); a chat API is `NotForThisPage`."""
    lm = loaded_model(spec)
    if isinstance(lm, ChatModel):
        raise NotForThisPage(CHAT_ONLY)
    return lm


def chosen_chat_model() -> ChatModel:
    """The chat API chosen in the sidebar, loaded; otherwise the page says how to choose one and stops."""
    spec = st.session_state.get("model_spec")
    if not spec or not is_chat_spec(spec):
        st.info("Choose **A chat API** in the sidebar (a URL with `api=chat` and `model=`). Log-prob methods for "
                "other models are on the other pages.")
        st.stop()
    return loaded_model(spec)  # type: ignore[return-value]  (a chat spec loads a ChatModel)


def loaded_model(spec: str) -> LanguageModel | ChatModel:
    """`shared_model`, and, when it is the model chosen in the sidebar, its status says so at once (not only after
    the page's slower work: a result under a model must never sit beside "Loading …" and the last model's details)."""
    lm = shared_model(spec)
    pending = st.session_state.get(PENDING)
    if pending is not None and pending[0] == spec:
        st.session_state[PENDING] = None
        describe_loaded(spec, pending[1], lm)
    return lm


@st.cache_data(show_spinner=False, max_entries=256)
def cached_stats(spec: str, texts: tuple[str, ...], bos: str = "auto") -> list[TokenStats]:
    """Token statistics of texts under a model: computed once, then every method and k reuses them; a miss computes
    in its turn in the server's line (call it through `ui.model_work.queued` to show the place while waiting)."""
    lm = shared_model(spec)  # no sidebar element from inside a cached function (it would be replayed)
    with model_slot() as progress:
        return lm.token_stats(list(texts), bos=bos, progress=progress)


def chosen_spec() -> str | None:
    """Draw the picker (nothing loaded); the spec it names, or None while the "other" box is empty or unconfirmed."""
    bar = st.sidebar
    bar.header("Model")
    # persist_state="session": the choice outlives Streamlit's stale-widget cleanup, which in 1.67 can drop a widget
    # outside a run_every fragment when that fragment reruns (streamlit#10805): a page measuring the model's speed
    # then showed the default model after its rerun
    choice = bar.radio("Model", list(BUILT_IN), format_func=BUILT_IN.get, key="model_choice",
                       label_visibility="collapsed", persist_state=SESSION)
    if choice not in ("other", "served", "chat"):
        return choice
    if choice == "chat":
        spec = bar.text_input("API URL and settings", key="model_chat", persist_state=SESSION,
                              placeholder=CHAT_EXAMPLE).strip()
        bar.caption("Settings after `?`: `api=chat` (or `completions`), `model=` the provider's name, `key_env=` the "
                    "**name** of the variable holding the key (never the key), `price_in=`/`price_out=` dollars per "
                    "million tokens, `rpm=`/`tpm=` rate limits. Only the pages *Extract books from a chat API* and *DE-COP quiz on a chat API* use it.")
        if not spec:
            bar.info("Enter the API's URL with api=chat and model=NAME.")
            return None
        if not is_chat_spec(spec):
            bar.error("A chat API's spec is an http(s):// URL with api=chat (or api=completions) and model=NAME.")
            return None
        if not keys_allowed(spec, bar):
            return None
    elif choice == "served":
        spec = bar.text_input("Server URL and settings", key="model_served", persist_state=SESSION,
                              placeholder=SERVED_EXAMPLE).strip()
        bar.caption("Settings after `?`: `model=` the served name, `tokenizer=` a local folder or hub id (default: "
                    "the server's model root), `key_env=` the variable holding an API key, `logprobs=full` for the "
                    "whole distribution (short texts). Check a server first with `mia models check URL`.")
        if not spec:
            bar.info("Enter the server's URL (vLLM: http://HOST:PORT/v1).")
            return None
        if not mia_core.is_served_spec(spec):
            bar.error("A served model's address starts with http:// or https://.")
            return None
        if not keys_allowed(spec, bar):
            return None
    else:
        spec = bar.text_input("Hub id or local folder", key="model_other", persist_state=SESSION,
                              placeholder="EleutherAI/pythia-160m").strip()
        if not spec:
            bar.info("Enter a model name or folder.")
            return None
    if spec == st.session_state.get(UNCONFIRMED):  # from a link: loaded (or asked) only when the visitor says so
        bar.info("This model came from the link. Load it only if you trust its name" +
                 (" and the server it names." if choice in ("served", "chat") else "."))
        if not bar.button("Load this model", key="model_confirm"):
            return None
        st.session_state.pop(UNCONFIRMED)
    return spec


def keys_allowed(spec: str, bar) -> bool:
    """False, said in the sidebar, for a spec that names a key's variable (key_env=) when the operator has not allowed
    visitors to use keys from the dashboard's environment: a visitor could send the key anywhere, or spend it."""
    if "key_env=" in spec and os.environ.get(SERVED_KEYS_ENV) != "1":
        bar.error(f"This dashboard sends no API key from its environment (key_env=): its operator allows that "
                  f"with {SERVED_KEYS_ENV}=1 (docs: Security and limits).")
        return False
    return True


def model_picker() -> tuple[str | None, StatusContainer | None]:
    """The picker and, below it, the model's status (nothing loaded yet): sets `model_spec` to the choice, or None when
    nothing is chosen or it failed to load. Returns the spec and its status, for `finish_loading` after the page."""
    st.session_state[PENDING] = None  # a status of an earlier run is never updated
    spec = chosen_spec()
    failed = st.session_state.setdefault(FAILED, {})
    st.session_state["model_spec"] = None if spec is None or spec in failed else spec
    if spec is None:
        return None, None
    if spec in failed:
        with st.sidebar.status(f"Could not load {spec}", state="error", expanded=True):
            st.error(failed[spec])
            if st.button("Try again", key="model_retry"):
                failed.pop(spec)
                st.rerun()
        return None, None
    known = st.session_state.get(LOADED) == spec
    status = st.sidebar.status(f"Loaded {spec}" if known else f"Loading {spec} …",
                               state="complete" if known else "running", expanded=False)
    st.session_state[PENDING] = (spec, status)
    return spec, status


def finish_loading(spec: str | None, status: StatusContainer | None) -> None:
    """After the page: load the chosen model (a cache hit when a page or an earlier run did) and end its status;
    a failure ends it in error, clears `model_spec` and draws the page again without the model."""
    if spec is None or status is None:
        return
    if spec in st.session_state.get(FAILED, {}):  # the page tried to load it and failed: not tried twice
        status.update(label=f"Could not load {spec}", state="error", expanded=True)
        st.rerun()
    if st.session_state.get(PENDING) is None:  # the page loaded it and the status said so then
        return
    try:
        loaded_model(spec)
    except mia_core.ModelLoadError as err:
        model_failed(spec, err)
        status.update(label=f"Could not load {spec}", state="error", expanded=True)
        st.rerun()


def describe_loaded(spec: str, status: StatusContainer, lm: LanguageModel) -> None:
    """End the chosen model's status as loaded and say under it what was loaded: where, dtype, context, fingerprint."""
    st.session_state[LOADED] = spec
    status.update(label=f"Loaded {spec}", state="complete")
    if isinstance(lm, ChatModel):  # a chat API: what answered, its tier and prices
        st.sidebar.caption(f"{md(lm.name)}\n\nanswers as **{md(str(lm.answered_model))}**, tier **{lm.tier.name}** "
                           f"(generated text only{', with its tokens’ log-probs' if lm.tier.name == 'GL' else ''}); "
                           f"{md(lm.prices.words())}")
        return
    if lm.model is None:  # served: where, and what it returns
        st.sidebar.caption(f"{md(lm.name)}\n\nserved at **{md(str(lm.device))}**, context "
                           f"{lm.max_length:,} tokens, {lm.concurrency.value} requests at once, fingerprint "
                           f"`{lm.fingerprint}`")
        for warning in getattr(lm, "warnings", []):
            st.sidebar.warning(warning)
        return
    st.sidebar.caption(f"{lm.name}\n\ndevice **{lm.device}**, dtype **{str(lm.dtype).removeprefix('torch.')}**, "
                       f"context {lm.max_length:,} tokens, fingerprint `{lm.fingerprint}`")


def model_failed(spec: str, err: Exception) -> None:
    """Remember that `spec` cannot be loaded (its message worded for the page) and clear the chosen model."""
    st.session_state.setdefault(FAILED, {})[spec] = public_message(str(err))
    st.session_state["model_spec"] = None
    if st.session_state.get(LOADED) == spec:
        st.session_state.pop(LOADED)


def allowed_methods(spec: str | None, methods: Sequence[str]) -> Allowed:
    """Which of `methods` the chosen model's access allows, and why not the others (all while no model is chosen).

    The access is the loaded model's: a page that lists methods loads the model here if the sidebar has not yet (a
    failed load is remembered, as the sidebar's, and the page is drawn again without the model).
    """
    if spec is None:
        return Allowed(list(methods), {})
    try:
        return methods_allowed(cached_model(spec), list(methods))
    except mia_core.ModelLoadError as err:
        model_failed(spec, err)
        return Allowed(list(methods), {})


def refused_note(refused: dict[str, str], container=None) -> None:
    """Under a method picker: the methods this model does not allow, each with the sentence that says why."""
    if not refused:
        return
    box = st if container is None else container
    with box.expander(f"Not available for this model: {', '.join(mia_core.METHODS[m].label for m in refused)}"):
        for why in refused.values():
            st.caption(why)


def pick_one_method(spec: str | None, methods: Sequence[str], key: str, box, *, first: str,
                    help: str | None = None) -> str:
    """The one method a page runs, picked in `box` among those the model allows (`first` chosen at the start), with
    the refused ones and why under it; with none allowed the page says why and stops."""
    offered = allowed_methods(spec, methods)
    if not offered.allowed:
        refused_note(offered.refused)
        st.stop()
    drop_refused(key, offered.allowed)
    method = box.selectbox("Method", offered.allowed, key=key, format_func=label,
                           index=offered.allowed.index(first) if first in offered.allowed else 0, help=help)
    refused_note(offered.refused, box)
    return method


def drop_refused(key: str, offered: Sequence[str]) -> None:
    """A picker's kept choice (from the URL or another model) that is no longer offered is dropped before it is drawn."""
    value = st.session_state.get(key)
    if isinstance(value, list) and any(v not in offered for v in value):
        st.session_state[key] = [v for v in value if v in offered]
    elif isinstance(value, str) and value not in offered:
        del st.session_state[key]


def short_model(spec: str) -> str:
    """A model as a run label or a file name shows it: a local folder by its last part (no server path), a served
    model by its served name, else the spec."""
    if is_served_spec(spec):
        try:
            return parse_served_spec(spec).model or urlsplit(spec).hostname or spec
        except ValueError:  # not a spec this project can read: shown as typed (file names cut it to safe characters)
            return spec
    return Path(spec).name if spec.startswith(("/", "./", "~")) else spec

"""A served model's spec string: the server's URL with the few settings MIA Lens needs, in one string that works
wherever `--model` does.

    http://127.0.0.1:8000/v1?model=demo&tokenizer=demo&key_env=OPENAI_API_KEY&logprobs=full&concurrency=8

Only the *name* of an environment variable holding an API key is ever part of a spec (specs are written into
results, reports and caches); the key itself is read from the environment when a request is sent.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: The servers whose answer shapes MIA Lens reads (`mia_core.model.served.shapes`).
APIS = ("vllm", "sglang", "echo")
#: `logprobs=`: "top" asks for the true token's log-prob, rank and the top-1 token; "full" for every log-prob.
LOGPROB_MODES = ("top", "full")
#: Bounds on what a spec may ask for (docs/security.md, "Bounds").
MAX_CONCURRENCY = 64
MAX_TIMEOUT_S = 3600.0
MAX_RETRIES = 10
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ServedSpec:
    """A parsed served-model spec; `text` is the canonical spec string (stored with results)."""

    base_url: str
    model: str | None = None
    tokenizer: str | None = None
    key_env: str | None = None
    api: str = "vllm"
    logprobs: str = "top"
    concurrency: int | None = None
    """Requests at once; None: sized from the server (`mia_core.model.served.capacity`)."""
    timeout: float = 120.0
    retries: int = 4

    @property
    def text(self) -> str:
        """The canonical spec: the URL with every setting that differs from its default, in a fixed order."""
        defaults = ServedSpec(self.base_url)
        query = {name: getattr(self, name) for name in _SETTINGS if getattr(self, name) != getattr(defaults, name)}
        return f"{self.base_url}?{urlencode(query)}" if query else self.base_url


_SETTINGS = ("model", "tokenizer", "key_env", "api", "logprobs", "concurrency", "timeout", "retries")


def is_served_spec(spec: object) -> bool:
    """True for a spec that names a server (an http:// or https:// URL) rather than a model to load."""
    return isinstance(spec, str) and spec.strip().lower().startswith(("http://", "https://"))


def parse_served_spec(spec: str) -> ServedSpec:
    """The `ServedSpec` of a spec string, or a ValueError that names the setting at fault and what it accepts."""
    base_url, values = split_spec(spec, _SETTINGS, "served model")
    return ServedSpec(base_url, **_checked(values))


def split_spec(spec: str, settings: tuple[str, ...], what: str) -> tuple[str, dict[str, str]]:
    """(base URL, {setting: value}) of a URL spec whose query holds `settings` (each at most once): a ValueError naming
    the fault — not a URL, credentials in it, an unknown setting (with the nearest known one)."""
    parts = urlsplit(spec.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"a {what}'s spec is an http:// or https:// URL with a host (got {spec!r})")
    if parts.username or parts.password:
        raise ValueError(f"put no credentials in a {what}'s URL (specs are stored with results): name the "
                         "environment variable that holds the API key with key_env=NAME")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the URL's port is not a port number: {spec!r}") from None
    netloc = parts.hostname if port is None else f"{parts.hostname}:{port}"
    if ":" in parts.hostname:  # an IPv6 address keeps its brackets
        netloc = f"[{parts.hostname}]" + ("" if port is None else f":{port}")
    base_url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") or "/v1", "", ""))
    values: dict[str, str] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name not in settings:
            near = difflib.get_close_matches(name, settings, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"unknown setting {name!r} in the {what}'s spec{hint}; settings: {', '.join(settings)}")
        if name in values:
            raise ValueError(f"the setting {name!r} is given twice in the {what}'s spec")
        values[name] = value
    return base_url, values


def spec_setting(spec: str, name: str) -> str | None:
    """The raw value of one setting of a URL spec (None when absent or not a URL): how a model kind recognises its
    specs without parsing them whole."""
    if not is_served_spec(spec):
        return None
    return dict(parse_qsl(urlsplit(spec.strip()).query, keep_blank_values=True)).get(name)


def _checked(values: dict[str, str]) -> dict:
    """Each setting converted and checked against its bounds."""
    out: dict = {}
    for name in ("model", "tokenizer"):
        if name in values:
            if not values[name].strip():
                raise ValueError(f"{name}= is empty in the served model's spec")
            out[name] = values[name].strip()
    if "key_env" in values:
        if not ENV_NAME.match(values["key_env"]):
            raise ValueError(f"key_env= names an environment variable (letters, digits, _), got {values['key_env']!r}")
        out["key_env"] = values["key_env"]
    for name, allowed in (("api", APIS), ("logprobs", LOGPROB_MODES)):
        if name in values:
            if values[name] not in allowed:
                raise ValueError(f"{name}={values[name]!r} is not one of: {', '.join(allowed)}")
            out[name] = values[name]
    if out.get("logprobs") == "full" and out.get("api", "vllm") != "vllm":
        raise ValueError(f"logprobs=full is read from vLLM only: api={out['api']} returns the true token's log-prob "
                         "(and at most its top one), not the whole distribution")
    out.update(checked_numbers(values, (("concurrency", int, 1, MAX_CONCURRENCY), ("timeout", float, 1.0, MAX_TIMEOUT_S),
                                        ("retries", int, 0, MAX_RETRIES))))
    return out


def checked_numbers(values: dict[str, str], bounds: tuple[tuple[str, type, float, float], ...]) -> dict:
    """The numeric settings among `values`, each converted by its type and held to its (low, high) bounds, or a
    ValueError naming the setting and what it accepts."""
    out: dict = {}
    for name, kind, low, high in bounds:
        if name in values:
            try:
                number = kind(values[name])
            except ValueError:
                raise ValueError(f"{name}= must be a number from {low:g} to {high:g} (got {values[name]!r})") from None
            if not low <= number <= high:
                raise ValueError(f"{name}= must be from {low:g} to {high:g} (got {values[name]})")
            out[name] = number
    return out

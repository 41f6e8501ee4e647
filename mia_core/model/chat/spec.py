"""A chat API's spec string: an OpenAI-compatible API that only generates text, in one string that works wherever
`--model` does.

    https://api.openai.com/v1?api=chat&model=gpt-4.1-2025-04-14&key_env=OPENAI_API_KEY&rpm=500&tpm=30000&price_in=2&price_out=8

`api=chat` sends `/chat/completions` (a conversation), `api=completions` sends `/completions` (a base model's raw
text). As for served models, only the *name* of the environment variable holding the key is part of a spec (specs are
stored with results and printed in reports); the key is read from the environment when a request is sent, and never
written anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from ..served.spec import ENV_NAME, checked_numbers, split_spec, spec_setting

#: The endpoints a chat API kind speaks: the `api=` values that make a URL spec a chat API's.
CHAT_APIS = ("chat", "completions")
#: Bounds on what a spec may ask for (docs/security.md, "Bounds").
MAX_CONCURRENCY = 32
MAX_TIMEOUT_S = 600.0
MAX_RETRIES = 10
MAX_PER_MINUTE = 1_000_000_000
MAX_PRICE_PER_M = 10_000.0


@dataclass(frozen=True)
class ChatSpec:
    """A parsed chat API spec; `text` is the canonical spec string (stored with results and in the evidence record)."""

    base_url: str
    model: str
    api: str = "chat"
    key_env: str | None = None
    rpm: int | None = None
    """Requests per minute this run may send (None: as many as the API takes; its 429s are honoured either way)."""
    tpm: int | None = None
    """Tokens (input + output, as the API's `usage` counts them) per minute."""
    concurrency: int = 4
    timeout: float = 120.0
    """Deadline of one request's whole answer, in seconds."""
    retries: int = 4
    """Retries after the first try (1 s, 2 s, 4 s … apart, or as Retry-After says): at most 5 tries by default."""
    price_in: float | None = None
    """Dollars per million input tokens (None: from `prices=`, else unknown)."""
    price_out: float | None = None
    prices: str | None = None
    """A TOML price table (`mia_core.model.chat.prices`): used for prices the spec does not give."""
    tier: str = "auto"
    """"auto": ask once whether the API returns the generated tokens' log-probs (tier GL) and record the answer;
    "G": never ask for log-probs (text only)."""

    @property
    def text(self) -> str:
        """The canonical spec: the URL with `api` and `model` first, then every setting that differs from its default."""
        defaults = ChatSpec(self.base_url, self.model)
        query = {"api": self.api, "model": self.model}
        query.update({name: getattr(self, name) for name in _SETTINGS[2:]
                      if getattr(self, name) != getattr(defaults, name)})
        return f"{self.base_url}?{urlencode(query)}"

    @property
    def endpoint(self) -> str:
        """The path requests go to under the base URL."""
        return "/chat/completions" if self.api == "chat" else "/completions"


_SETTINGS = ("api", "model", "key_env", "rpm", "tpm", "concurrency", "timeout", "retries", "price_in", "price_out",
             "prices", "tier")
#: `tier=` values.
TIERS = ("auto", "G")


def is_chat_spec(spec: object) -> bool:
    """True for a URL spec whose `api=` names a chat API's endpoint (`chat` or `completions`)."""
    return isinstance(spec, str) and spec_setting(spec, "api") in CHAT_APIS


def parse_chat_spec(spec: str) -> ChatSpec:
    """The `ChatSpec` of a spec string, or a ValueError that names the setting at fault and what it accepts."""
    base_url, values = split_spec(spec, _SETTINGS, "chat API")
    if values.get("api") not in CHAT_APIS:
        raise ValueError(f"a chat API's spec says api=chat or api=completions (got {values.get('api')!r})")
    model = values.get("model", "").strip()
    if not model:
        raise ValueError("a chat API's spec names the model with model=NAME (as the provider spells it, e.g. "
                         "gpt-4.1-2025-04-14: a dated name, so that the record says which model answered)")
    out: dict = {"api": values["api"], "model": model}
    if "key_env" in values:
        if not ENV_NAME.match(values["key_env"]):
            raise ValueError(f"key_env= names an environment variable (letters, digits, _), got {values['key_env']!r}")
        out["key_env"] = values["key_env"]
    out.update(checked_numbers(values, (
        ("rpm", int, 1, MAX_PER_MINUTE), ("tpm", int, 1, MAX_PER_MINUTE), ("concurrency", int, 1, MAX_CONCURRENCY),
        ("timeout", float, 1.0, MAX_TIMEOUT_S), ("retries", int, 0, MAX_RETRIES), ("price_in", float, 0.0, MAX_PRICE_PER_M),
        ("price_out", float, 0.0, MAX_PRICE_PER_M))))
    if "tier" in values:
        if values["tier"] not in TIERS:
            raise ValueError(f"tier={values['tier']!r} is not one of: {', '.join(TIERS)} (GL is found by asking)")
        out["tier"] = values["tier"]
    if "prices" in values:
        path = Path(values["prices"]).expanduser()
        if not path.is_file():
            raise ValueError(f"prices= names a price table that does not exist: {values['prices']}")
        out["prices"] = values["prices"]
    return ChatSpec(base_url, **out)

"""`ChatModel`: a model behind an OpenAI-compatible API that only generates text — the models copyright disputes are
about. It offers generation only (tier G), or generation with the generated tokens' log-probs (tier GL), which is
asked once when it connects and recorded (METHODS-API.md, "Access tiers"); every white-box method is refused.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from ...api.access import ModelAccess
from .client import ChatClient, ChatError, Exchange
from .prices import Prices, prices_for
from .spec import ChatSpec, parse_chat_spec

#: Alternatives asked for per generated token when probing for tier GL (OpenAI's and vLLM's default maximum).
PROBE_TOP_LOGPROBS = 20
#: The probe's prompt: one short, neutral request.
PROBE_PROMPT = "Reply with the single word: ready"


@dataclass(frozen=True)
class Tier:
    """What the API returns: "G" (text) or "GL" (text + log-probs of the generated tokens, `k_top` alternatives each)."""

    name: str
    k_top: int = 0
    token_ids: bool = False
    """Whether the API spells its tokens as ids ("token_id:N", vLLM's `--return-tokens-as-token-ids`): reading them
    as text then needs the model's tokenizer."""


class ChatModel:
    """A chat API as a model: `.chat` (its parsed spec), `.client`, `.tier`, `.prices`, and the probe's exchanges
    (`probe_exchanges`, written first into each run's evidence record)."""

    model = None  # no weights, no tokenizer: every method that needs them is refused by `access`
    tokenizer = None

    def __init__(self, chat: ChatSpec, client: ChatClient, tier: Tier, probe_exchanges: list[Exchange],
                 answered_model: str | None):
        self.chat, self.client, self.tier = chat, client, tier
        self.probe_exchanges = probe_exchanges
        #: The model string the API answered with (a provider may answer "gpt-4.1-2025-04-14" to "gpt-4.1").
        self.answered_model = answered_model
        self.prices: Prices = prices_for(chat)
        self.spec = chat.text
        self.name = f"{chat.model} at {chat.base_url}"
        self.fingerprint = hashlib.sha256(f"{chat.base_url}|{chat.model}|{answered_model}".encode()).hexdigest()[:16]
        self.warnings: list[str] = []

    @property
    def access(self) -> ModelAccess:
        """Generation only: no log-prob of a given text, no tokenizer, no further passes or gradients."""
        return ModelAccess(False, 0, generation=True, tokens=False, where="this chat API",
                           hint="it returns log-probs only of the tokens it generates" if self.tier.name == "GL" else "")

    def __repr__(self) -> str:
        return f"ChatModel({self.spec!r}, tier={self.tier.name})"


def connect_chat(spec: str) -> ChatModel:
    """A `ChatModel` for a spec string: the key's variable checked, then one short request that learns the tier (and
    shows at once a refused key, an unknown model or a wrong URL)."""
    chat = parse_chat_spec(spec)
    if chat.key_env is not None and not os.environ.get(chat.key_env):
        raise ChatError(f"the environment variable {chat.key_env} (key_env= of the spec) is not set: set it to the "
                        "API's key")
    client = ChatClient(chat)
    exchanges: list[Exchange] = []
    ask_logprobs = chat.tier == "auto"
    try:
        answer = client.send(probe_body(chat, ask_logprobs), exchanges.append, token_bound=64)
    except ChatError:
        if not ask_logprobs or not exchanges or exchanges[-1].status != 400:
            raise
        ask_logprobs = False  # an API that refuses the log-prob fields: tier G, asked again without them
        answer = client.send(probe_body(chat, False), exchanges.append, token_bound=64)
    returned = answer.choices[0].logprobs if ask_logprobs else None
    k_top = max((len(t.top) for t in returned), default=0) if returned else 0
    token_ids = bool(returned) and all(t.token.startswith("token_id:") for t in returned)
    tier = Tier("GL", k_top, token_ids) if returned else Tier("G")
    return ChatModel(chat, client, tier, exchanges, answer.model)


def probe_body(chat: ChatSpec, logprobs: bool) -> dict:
    """The probe request: one token of a short answer at temperature 0, with the log-prob fields when asked."""
    body: dict = {"model": chat.model, "max_tokens": 4, "temperature": 0}
    if chat.api == "chat":
        body["messages"] = [{"role": "user", "content": PROBE_PROMPT}]
        if logprobs:
            body.update(logprobs=True, top_logprobs=PROBE_TOP_LOGPROBS)
    else:
        body["prompt"] = PROBE_PROMPT
        if logprobs:
            body["logprobs"] = PROBE_TOP_LOGPROBS
    return body

"""The kind for a chat API: an OpenAI-compatible API that only generates text (`api=chat` or `api=completions` in
the URL spec; `mia_core.model.chat`). Tier G (text) or GL (with the generated tokens' log-probs), asked once."""
from __future__ import annotations

from ..chat.chat_model import ChatModel, connect_chat
from ..chat.spec import is_chat_spec
from ..kinds import LoadOptions, ModelKind, register_kind


def _load(spec: str, options: LoadOptions) -> ChatModel:
    return connect_chat(spec)


CHAT = register_kind(ModelKind(
    "chat", "a chat API (https://HOST/v1?api=chat&model=NAME&key_env=VAR: GPT, Claude, Gemini … through an "
    "OpenAI-compatible endpoint)", "generated text only (tier G), or with the generated tokens' log-probs (GL): "
    "book extraction, never a log-prob method", recognises=is_chat_spec, load=_load))

"""The kind for a model behind a server that returns prompt log-probs (vLLM, SGLang, an echo-capable
OpenAI-compatible server): a URL with settings (`mia_core.model.served.spec`); the model runs where it is served."""
from __future__ import annotations

from ..chat.spec import is_chat_spec
from ..folders import load_tokenizer
from ..kinds import LoadOptions, ModelKind, register_kind
from ..served.served_model import ServedModel, connect
from ..served.spec import is_served_spec


def _load(spec: str, options: LoadOptions) -> ServedModel:
    return connect(spec, load_tokenizer, max_length=options.max_length)


SERVED = register_kind(ModelKind(
    "served", "a server's URL with settings (http://HOST:PORT/v1?model=NAME: vLLM, SGLang, OpenAI-compatible)",
    "the prompt log-probs the server returns (the true token's, its top one, or with vLLM the whole distribution) "
    "and, with vLLM, seeded generation", recognises=lambda spec: is_served_spec(spec) and not is_chat_spec(spec),
    load=_load))

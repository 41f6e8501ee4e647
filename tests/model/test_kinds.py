"""The model-kind registry: every kind registered once, each spec recognised by exactly its kind, and `load_model`
reaching a kind only through the registry."""
from __future__ import annotations

import pytest

from mia_core.model.backends import KINDS, kind_of
from mia_core.model.chat.chat_model import ChatModel
from mia_core.model.kinds import ModelKind, register_kind
from mia_core.model.loading import load_model

from tests.support.fake_chat import FakeChat


def test_every_kind_is_registered_with_its_words():
    assert set(KINDS) == {"demo", "demo-adapter", "folder", "served", "chat"}
    assert [k.name for k in KINDS.values() if k.fallback] == ["folder"]
    assert all(kind.describes and kind.offers for kind in KINDS.values())


@pytest.mark.parametrize("spec, kind", [
    ("demo", "demo"), ("demo-known", "demo-adapter"), ("demo-traps", "demo-adapter"), ("./my-model", "folder"),
    ("EleutherAI/pythia-160m", "folder"), ("http://127.0.0.1:8000/v1?model=demo", "served"),
    ("https://h.example/v1?model=m&api=sglang", "served"), ("https://api.openai.com/v1?api=chat&model=gpt-x", "chat"),
    ("http://127.0.0.1:8000/v1?model=base&api=completions", "chat"),
])
def test_each_spec_is_recognised_by_its_kind_only(spec, kind):
    assert kind_of(spec).name == kind
    assert [k.name for k in KINDS.values() if not k.fallback and k.recognises(spec)] in ([kind], [])


def test_a_kind_is_registered_once_and_one_kind_takes_the_rest():
    with pytest.raises(ValueError, match="registered already"):
        register_kind(ModelKind("served", "x", "y", lambda s: False, lambda s, o: None))
    with pytest.raises(ValueError, match="only one model kind"):
        register_kind(ModelKind("another-fallback", "x", "y", lambda s: True, lambda s, o: None, fallback=True))
    assert "another-fallback" not in KINDS


def test_load_model_connects_a_chat_api_through_its_kind():
    with FakeChat("one two three four five") as api:
        model = load_model(api.spec(tier="G"))
    assert isinstance(model, ChatModel) and model.tier.name == "G" and model.access.tokens is False
    assert "logprobs" not in model.probe_exchanges[0].request.decode()  # tier=G never asks for them

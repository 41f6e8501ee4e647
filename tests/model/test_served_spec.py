"""A served model's spec string: parsed, checked against its bounds, written back canonically, and never holding a
secret."""
from __future__ import annotations

import pytest

from mia_core.model.served.spec import MAX_CONCURRENCY, ServedSpec, is_served_spec, parse_served_spec


def test_defaults_and_canonical_text():
    spec = parse_served_spec("http://127.0.0.1:8000/v1/")
    assert spec == ServedSpec("http://127.0.0.1:8000/v1")
    assert spec.text == "http://127.0.0.1:8000/v1"
    full = parse_served_spec("https://host.example/v1?logprobs=full&model=demo&concurrency=3&key_env=MY_KEY")
    assert (full.model, full.logprobs, full.concurrency, full.key_env) == ("demo", "full", 3, "MY_KEY")
    assert full.text == "https://host.example/v1?model=demo&key_env=MY_KEY&logprobs=full&concurrency=3"
    assert parse_served_spec(full.text) == full  # the canonical text parses back to the same spec
    assert parse_served_spec("http://h:9000").base_url == "http://h:9000/v1"  # a bare server gets /v1


@pytest.mark.parametrize("text, message", [
    ("http://h/v1?modle=x", "did you mean 'model'"),
    ("http://h/v1?model=a&model=b", "given twice"),
    ("http://h/v1?concurrency=0", "from 1 to 64"),
    (f"http://h/v1?concurrency={MAX_CONCURRENCY + 1}", "from 1 to 64"),
    ("http://h/v1?timeout=soon", "must be a number"),
    ("http://h/v1?api=openai", "not one of: vllm, sglang, echo"),
    ("http://h/v1?key_env=my-key", "names an environment variable"),
    ("http://user:secret@h/v1", "no credentials"),
    ("http://h:port/v1", "not a port number"),
    ("ftp://h/v1", "http:// or https://"),
    ("http://h/v1?api=sglang&logprobs=full", "logprobs=full is read from vLLM only"),  # else Min-K%++ would get NaN
    ("http://h/v1?logprobs=full&api=echo", "logprobs=full is read from vLLM only"),
])
def test_bad_specs_say_what_is_wrong(text, message):
    with pytest.raises(ValueError, match=message):
        parse_served_spec(text)


def test_only_urls_are_served_specs():
    assert is_served_spec("http://localhost:8000/v1") and is_served_spec(" HTTPS://x")
    assert not is_served_spec("demo") and not is_served_spec("owner/name") and not is_served_spec("./http:/x")

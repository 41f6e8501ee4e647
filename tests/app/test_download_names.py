"""Downloads say what they hold: named by what and whose (run, model, text), in characters safe on every system."""
from __future__ import annotations

import pytest

from mia_core.names import file_name
from ui.models import short_model


@pytest.mark.parametrize("spec, shown", [
    ("demo-known", "demo-known"),
    ("/srv/models/llama-3-8b", "llama-3-8b"),  # a folder by its last part: no server path in a file name
    ("http://127.0.0.1:8000/v1?model=mine&logprobs=full", "mine"),  # a served model by its served name
    ("http://10.0.0.5:8000/v1", "10.0.0.5"),  # no name given: the host
    ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B"),
])
def test_a_model_is_named_by_what_identifies_it(spec, shown):
    assert short_model(spec) == shown


def test_file_names_join_their_parts_in_safe_characters_only():
    assert file_name("audit", "3f2a9c1e0b7d", "demo-known", "books", suffix=".csv") == "audit_3f2a9c1e0b7d_demo-known_books.csv"
    assert file_name("tokens", "meta-llama/Llama-3.1-8B", "ab12cd34", suffix=".csv") == "tokens_meta-llama-Llama-3.1-8B_ab12cd34.csv"
    hostile = file_name("tokens", "../../etc/passwd\u202e\n", "", "..", suffix=".html")
    assert hostile == "tokens_etc-passwd_x.html"  # no path, no control character; an empty part left out

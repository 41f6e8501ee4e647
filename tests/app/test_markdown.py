"""User strings in Markdown: a served model's URL is shown as itself, and GitHub-flavoured Markdown (Streamlit's) finds
no autolink in it, which would show the escapes as backslashes ("127\\.0\\.0\\.1")."""
from __future__ import annotations

import html
import re

import pytest
from markdown_it import MarkdownIt

from ui.markdown import md

#: GFM's extended autolinks start at these (github.github.com/gfm, "Autolinks (extension)"); an escaped ':' or '.'
#: inside them ends the match before it starts.
AUTOLINK_STARTS = re.compile(r"https?://|www\.", re.I)


@pytest.mark.parametrize("spec", ["http://127.0.0.1:8602/v1?model=demo", "https://api.example.org/v1?model=a_b&key_env=K",
                                  "www.example.org/models/x", "./models/llama-3*"])
def test_a_model_spec_reads_as_itself_and_never_as_an_autolink(spec):
    escaped = md(spec)
    assert not AUTOLINK_STARTS.search(escaped), escaped
    assert MarkdownIt().renderInline(escaped) == html.escape(spec)  # CommonMark shows exactly the spec

"""User strings shown inside Markdown as themselves: no links, emphasis, HTML or maths they could smuggle in."""
from __future__ import annotations

import re

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>$:&])")


def md(text) -> str:
    """A user string inside Markdown shown as itself (no links, emphasis, HTML or maths)."""
    return _MARKDOWN.sub(r"\\\1", " ".join(str(text).split()))  # a line break would start a new block

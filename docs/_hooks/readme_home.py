"""MkDocs hook: the site's home page is README.md, its links rewritten for the site, so the two never drift."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_for_site(text: str) -> str:
    """README's Markdown as the site's home: `docs/x.md` links become `x.md`, the screenshot comes from `img/`."""
    text = re.sub(r"\]\(docs/", "](", text)
    return text.replace("](assets/explore.png)", "](img/explore.png)")


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    """Replace the home page's placeholder with the README."""
    if page.file.src_uri == "index.md":
        return readme_for_site(README.read_text(encoding="utf-8"))
    return markdown

"""Plain text out of uploaded documents (.txt, .md, .pdf, .epub), with a size bound and clear errors."""
from __future__ import annotations

import io
import re
from html.parser import HTMLParser

#: Largest upload accepted, in bytes.
MAX_UPLOAD_BYTES = 20_000_000
SUFFIXES = (".txt", ".md", ".pdf", ".epub")


class DocumentError(ValueError):
    """An upload that cannot be turned into text; the message names the file."""


def document_text(name: str, data: bytes, *, max_bytes: int = MAX_UPLOAD_BYTES) -> str:
    """The text of an uploaded file, by its extension."""
    suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
    if suffix not in SUFFIXES:
        raise DocumentError(f"{name}: unsupported file type; use one of {', '.join(SUFFIXES)}")
    if len(data) > max_bytes:
        raise DocumentError(f"{name}: {len(data) / 1e6:.1f} MB is over the {max_bytes / 1e6:.0f} MB limit")
    if not data.strip():
        raise DocumentError(f"{name}: the file is empty")
    reader = {".pdf": _pdf_text, ".epub": _epub_text}.get(suffix, _plain_text)
    text = reader(name, data).strip()
    if not text:
        raise DocumentError(f"{name}: no text found (a scanned PDF or an empty book?)")
    return text


def _plain_text(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise DocumentError(f"{name}: looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentError(f"{name}: not UTF-8 text (byte {err.start})") from None


def _pdf_text(name: str, data: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        return "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except (PdfReadError, ValueError, KeyError, TypeError) as err:
        raise DocumentError(f"{name}: not a readable PDF ({err})") from None


class _TextOfHtml(HTMLParser):
    """Collects the text of an XHTML chapter, paragraph breaks kept."""

    BLOCKS = {"p", "div", "br", "h1", "h2", "h3", "h4", "h5", "h6", "li", "tr"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style")
        if tag in self.BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style") and self.skip > 0

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def _epub_text(name: str, data: bytes) -> str:
    import ebooklib
    from ebooklib import epub

    try:
        book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
    except Exception as err:  # ebooklib raises bare zipfile/KeyError/EpubException on bad files
        raise DocumentError(f"{name}: not a readable EPUB ({type(err).__name__})") from None
    chapters = []
    for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
        parser = _TextOfHtml()
        parser.feed(item.get_content().decode("utf-8", errors="replace"))
        chapters.append(re.sub(r"\n\s*\n\s*", "\n\n", "".join(parser.parts)).strip())
    return "\n\n".join(c for c in chapters if c)

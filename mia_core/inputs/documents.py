"""Plain text out of uploaded documents (.txt, .md, .pdf, .epub), within the bounds of `limits`, with clear errors.

Any failure of a parser on a hostile or malformed file (pypdf, ebooklib, lxml, zipfile) is a DocumentError
naming the file, never a traceback.
"""
from __future__ import annotations

import io
import re
from html.parser import HTMLParser

import ebooklib
from ebooklib import epub
from pypdf import PdfReader
from pypdf.errors import DependencyError

from . import limits
from .limits import MAX_UPLOAD_BYTES, TooLarge

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
    if len(text) > limits.MAX_BOOK_TEXT_CHARS:
        raise _too_long(name)
    return text


def _too_long(name: str) -> DocumentError:
    return DocumentError(f"{name}: more than {limits.MAX_BOOK_TEXT_CHARS:,} characters of text, the limit for one book")


def _reason(err: BaseException) -> str:
    """What the parser said, as a short single line without its exception's class name (a reader wants what is wrong
    and what to do, not `PdfStreamError`)."""
    message = " ".join(str(err).split())
    return f"the parser said: {message[:160]}" if message else "the parser gave no detail"


def _plain_text(name: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise DocumentError(f"{name}: looks binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentError(f"{name}: not UTF-8 text (byte {err.start})") from None


def _pdf_text(name: str, data: bytes) -> str:
    """Page texts joined by blank lines, stopped once over the text bound (pages can inflate far beyond the file).

    An encrypted PDF that opens without a password (only its owner's permissions restricted, as many published
    books) is read as any viewer reads it: pypdf tries the empty user password. One that needs a password is refused.
    """
    reader, pages, total = None, [], 0
    try:
        reader = PdfReader(io.BytesIO(data))
        for page in reader.pages:
            pages.append(page.extract_text() or "")
            total += len(pages[-1])
            if total > limits.MAX_BOOK_TEXT_CHARS:
                raise _too_long(name)
    except DocumentError:
        raise
    except Exception as err:  # pypdf raises its own errors, and ValueError/KeyError/RecursionError… on hostile files
        if _encrypted(reader, data):  # one that opens without a password (owner-restricted) was read above
            raise DocumentError(f"{name}: encrypted PDF not supported: it needs a password to open, or a decoder we do "
                                f"not install (AES); save an unencrypted copy ({_reason(err)})") from None
        if isinstance(err, DependencyError):
            raise DocumentError(f"{name}: this PDF needs a decoder that is not installed ({_reason(err)})") from None
        raise DocumentError(f"{name}: not a readable PDF; open it in a PDF reader and save or print it as a new PDF, "
                            f"or convert it to .txt ({_reason(err)})") from None
    return "\n\n".join(pages)


def _encrypted(reader: PdfReader | None, data: bytes) -> bool:
    """Whether the PDF is encrypted; pypdf fails inside its constructor on AES without `cryptography`, so the
    bytes are searched for the trailer's /Encrypt key then."""
    try:
        return bool(reader.is_encrypted) if reader is not None else b"/Encrypt" in data
    except Exception:  # a trailer too broken to tell
        return False


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
    """Chapter texts of an EPUB, after bounding what its zip inflates to (ebooklib reads every manifest entry whole)."""
    try:
        archive = limits.open_zip(io.BytesIO(data))
        limits.check_declared(archive.infolist(), limits.MAX_BOOK_INFLATED_BYTES, "one book")
        limits.verify_sizes(archive)  # actual sizes too: ebooklib then meets no more than was declared
    except TooLarge as err:
        raise DocumentError(f"{name}: {err}") from None
    except limits.ZIP_ERRORS as err:
        raise DocumentError(f"{name}: not a readable EPUB; convert it to .txt or re-export it from an e-book editor "
                            f"({_reason(err)})") from None
    try:
        book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
        chapters = []
        for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT):
            parser = _TextOfHtml()
            parser.feed(item.get_content().decode("utf-8", errors="replace"))
            chapters.append(re.sub(r"\n\s*\n\s*", "\n\n", "".join(parser.parts)).strip())
    except Exception as err:  # ebooklib raises bare zipfile/KeyError/EpubException/lxml errors on bad files
        raise DocumentError(f"{name}: not a readable EPUB; convert it to .txt or re-export it from an e-book editor "
                            f"({_reason(err)})") from None
    return "\n\n".join(c for c in chapters if c)

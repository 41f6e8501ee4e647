"""Document extraction: text, PDF and EPUB files, and a clear error for each bad file."""
from __future__ import annotations

import io

import pytest

from pypdf import PdfWriter

from mia_core.inputs.documents import DocumentError, document_text
from tests.inputs.test_hostile_files import aes_pdf, text_pdf


def test_documents_text_pdf_epub_and_bad_files():
    assert document_text("a.md", "# Title\nbody".encode()) == "# Title\nbody"
    with pytest.raises(DocumentError, match="a.txt: the file is empty"):
        document_text("a.txt", b"  ")
    with pytest.raises(DocumentError, match="limit"):
        document_text("a.txt", b"x" * 101, max_bytes=100)
    with pytest.raises(DocumentError, match="unsupported"):
        document_text("a.docx", b"x")
    with pytest.raises(DocumentError, match="not a readable PDF"):
        document_text("bad.pdf", b"%PDF-1.4 garbage")
    with pytest.raises(DocumentError, match="not a readable EPUB"):
        document_text("bad.epub", b"PK not really")
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("id1")
    book.set_title("T")
    chapter = epub.EpubHtml(title="c1", file_name="c1.xhtml")
    chapter.content = "<html><body><h1>Chapter one</h1><p>It was a dark night.</p><p>Rain fell.</p></body></html>"
    book.add_item(chapter)
    book.spine = [chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    buffer = io.BytesIO()
    epub.write_epub(buffer, book)
    text = document_text("b.epub", buffer.getvalue())
    assert "It was a dark night." in text and "Rain fell." in text
    from pypdf import PdfWriter

    writer, out = PdfWriter(), io.BytesIO()
    writer.add_blank_page(width=72, height=72)
    writer.write(out)
    with pytest.raises(DocumentError, match="no text found"):
        document_text("blank.pdf", out.getvalue())


def rc4_pdf(text: str, user_password: str) -> bytes:
    """A text PDF encrypted with RC4 (pypdf reads it without `cryptography`), opened by `user_password`."""
    writer = PdfWriter(clone_from=io.BytesIO(text_pdf(text)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_encrypted_pdfs_open_as_a_viewer_opens_them():
    """What the docs say: read when it opens without a password (owner-restricted), refused when it needs one."""
    assert b"/Encrypt" in rc4_pdf("x", "")
    assert document_text("restricted.pdf", rc4_pdf("open to any reader", "")) == "open to any reader"
    with pytest.raises(DocumentError, match="restricted.pdf: encrypted PDF not supported: it needs a password"):
        document_text("restricted.pdf", rc4_pdf("locked words", "secret"))
    with pytest.raises(DocumentError, match="secret.pdf: encrypted PDF not supported"):
        document_text("secret.pdf", aes_pdf())  # AES-256 needs `cryptography`, which is not installed

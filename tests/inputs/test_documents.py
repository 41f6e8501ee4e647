"""Document extraction: text, PDF and EPUB files, and a clear error for each bad file."""
from __future__ import annotations

import io

import pytest

from mia_core.inputs.documents import DocumentError, document_text


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

"""Heatmap HTML (escaping, whitespace, colours, outlines), document extraction, benchmark loaders offline."""
from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest

from mia_core import score
from mia_core.inputs.benchmarks import load_benchmark, to_frame
from mia_core.inputs.documents import DocumentError, document_text
from mia_core.heatmap import colour, heatmap_html


def test_heatmap_escapes_user_text_and_keeps_whitespace(llama_lm):
    text = 'Hi <script>alert("x")</script> & bye\n\n  indented'
    stats = llama_lm.token_stats([text], cache=False)[0]
    s = score("min_k", stats, k=0.2)
    page = heatmap_html(stats, s.token_scores, s.selected, decode=llama_lm.tokenizer.decode)
    assert "<script" not in page and "</script" not in page and "&lt;" in page  # tokens may split the tag
    visible = re.sub(r"<[^>]+>", "", page.split('<div class="mia-legend"')[0])
    import html

    assert html.unescape(visible) == text  # every character shown once, newlines and spaces kept
    assert page.split("mia-legend")[0].count("outline:2px") == int(s.selected.sum())
    assert page.count('class="mia-tok"') == stats.n_scored
    assert "mia-legend" in page and "white-space:pre-wrap" in page


def test_colour_scale_is_diverging():
    assert colour(0.0, -1, 0, 1) == "rgb(247,247,247)"
    assert colour(-5.0, -1, 0, 1) == "rgb(178,24,43)"
    assert colour(1.0, -1, 0, 1) == "rgb(33,102,172)"


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


@pytest.mark.parametrize("name, rows, expected", [
    ("wikimia-32", [{"input": "old fact", "label": 1}, {"input": "new fact", "label": 0}], [1, 0]),
    ("bookmia", [{"book_id": 3, "book": "B", "snippet_id": 0, "snippet": "s", "label": 0},
                 {"book_id": 4, "book": "C", "snippet_id": 1, "snippet": "t", "label": 1}], [0, 1]),
    ("mimir-arxiv", [{"member": "m1", "nonmember": "n1"}, {"member": "m2", "nonmember": "n2"}], [1, 1, 0, 0]),
])
def test_benchmark_loaders_read_hub_schema_files_offline(name, rows, expected, tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    frame = load_benchmark(name, data_files=str(path))
    assert frame["label"].tolist() == expected and frame["text"].map(len).gt(0).all()
    if name == "bookmia":
        assert frame["book"].tolist() == ["B", "C"]
    with pytest.raises(KeyError, match="available"):
        load_benchmark("wikimia-33", data_files=str(path))
    with pytest.raises(ValueError):
        to_frame("nope", rows)

"""The Book audit page's extraction: the checkbox's cost before it runs (held to the server's bound), and the report's
extraction section for a run with an extraction beside it — its figures the extraction API's on each book's text,
book names escaped — including one the page resumes itself."""
from __future__ import annotations

import html
import math
import time

import pytest

from mia_core import load_model
from mia_core.audit.extraction import book_row, finding
from mia_core.audit.extraction_runs import extraction_books, plan_extraction
from mia_core.audit.jobs import AuditSettings, run_audit
from mia_core.audit.sources import AuditInputs, Book, read_books, read_calibration
from mia_core.audit.timing import TIMING_TEXT
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.limits import MAX_REQUEST_TOKEN_PASSES_CPU
from mia_core.model.options import ModelRef
from mia_core.runs.extraction_units import ExtractionUnits
from mia_core.runs.store import ResultsStore

from tests.support.tiny import random_texts

pytestmark = pytest.mark.integration
SETTINGS = ExtractionSettings(prefix=8, suffix=6, stride=5, top_k=300)  # the whole vocabulary: every p_z finite
HOSTILE = "<b>bold</b> & <script>x</script>"


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    path = tmp_path / "results.duckdb"
    monkeypatch.setenv("MIA_LENS_STORE", str(path))
    return path


def small_inputs() -> AuditInputs:
    """Two audited books (one named to break HTML), a member and a non-member calibration book: 60–90 words each."""
    text = lambda seed, n: " ".join(random_texts(n, seed=seed, min_words=10, max_words=10))  # noqa: E731
    books = [Book(HOSTILE, text(1, 9), "t"), Book("plain", text(2, 6), "t")]
    calibration = [Book("member", text(3, 6), "t", 1), Book("other", text(4, 6), "t", 0)]
    return AuditInputs(books, calibration, [])


def audited_run(store_path, model_dir) -> str:
    """A finished audit of the small books under the tiny model."""
    inputs = small_inputs()
    settings = AuditSettings(method="loss", params={}, snippet_words=20, n_boot=50)
    result = run_audit(ModelRef(str(model_dir)), inputs.books, inputs.calibration, settings, ResultsStore(store_path))
    return result.run["run_id"]


def test_the_checkbox_tells_the_cost_and_holds_back_what_passes_the_bound(store_path, tiny_app, tiny_model_dir):
    at = tiny_app("app_pages/audit.py")  # the demo plays: far more than one request may cost on a CPU
    assert not at.button(key="audit_run").disabled
    at.checkbox(key="audit_extraction").check().run()
    assert not at.exception, at.exception
    lm = load_model(str(tiny_model_dir))
    per_word = len(lm.tokenizer(TIMING_TEXT)["input_ids"]) / len(TIMING_TEXT.split())
    words = sum(len(b.text.split()) for b in read_calibration("demo-books")[0] + read_books("demo-books")[0])
    tokens = math.ceil(words * per_word)
    passes = math.ceil(tokens * (50 + 50) / 10)
    shown = next(e.value for e in at.error if "Extraction cost before it runs" in e.value)
    assert f"about {tokens:,} tokens" in shown and f"about {passes:,} token-passes" in shown
    assert f"{MAX_REQUEST_TOKEN_PASSES_CPU:,}" in shown and "mia audit-books --extraction" in shown
    assert at.button(key="audit_run").disabled
    at.checkbox(key="audit_extraction").uncheck().run()
    assert not at.button(key="audit_run").disabled


def section_html(at) -> str:
    return "".join(h.proto.body for h in at.get("html"))


def test_an_extraction_beside_a_run_shows_the_reports_section_resumed_on_the_page(store_path, tiny_app,
                                                                                   tiny_model_dir):
    run_id = audited_run(store_path, tiny_model_dir)
    lm = load_model(str(tiny_model_dir))
    inputs = small_inputs()
    x_run = plan_extraction(ResultsStore(store_path), ModelRef(str(tiny_model_dir)), lm,
                            lambda: extraction_books(inputs), SETTINGS, audit_run=run_id)
    at = tiny_app("app_pages/audit.py")
    at.session_state["audit_run_id"] = run_id
    at.run()
    assert not at.exception, at.exception
    units = ExtractionUnits(store_path)
    _, total = units.progress(x_run)
    assert total >= 4 and any(f"0 of {total:,} units" in p.proto.text for p in at.get("progress"))
    at.button(key="audit_x_resume").click().run()  # no job of this server computes it: the page resumes it
    deadline = time.time() + 300
    store = ResultsStore(store_path)
    # the job's last write after its units: "scored", or already "done" when the page's rerun after the click read the
    # finished run (the tiny model can finish within that rerun; waiting for "scored" then ran out the 300 s)
    while store.run(x_run)["status"] not in ("scored", "done") and time.time() < deadline:
        time.sleep(0.5)
    assert units.progress(x_run) == (total, total)
    at.run()
    assert not at.exception, at.exception
    body = section_html(at)
    assert "<h2>Verbatim extraction</h2>" in body and "not a statistical inference" in body
    assert HOSTILE not in body and html.escape(HOSTILE, quote=False) in body  # the book's name, escaped
    every = list(inputs.books) + list(inputs.calibration)
    for book, result in zip(every, extract_texts(lm, [b.text for b in every], SETTINGS, cache=False)):
        want = book_row(book.name, result)  # the extraction API on the book's text, computed here
        assert want["extraction_windows"] > 0 and math.isfinite(want["max_log10_pz"])
        assert html.escape(finding(want), quote=False) in body
        assert f"<td>{want['extraction_windows']:,}</td>" in body
    assert any("max log10 p_z" in c.proto.spec for c in at.get("plotly_chart"))  # the strip chart
    assert store.run(x_run)["status"] == "done"  # read once finished

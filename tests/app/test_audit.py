"""The Book audit page through AppTest: a background run that survives reruns, reattaching by id, results."""
from __future__ import annotations

import html
import io
import json
import time
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pytest
from markdown_it import MarkdownIt
from pypdf import PdfReader
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from mia_core import datasets
from mia_core.audit.books import VERDICT_SHORT, VERDICTS
from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.pdf import UNAVAILABLE as PDF_UNAVAILABLE
from mia_core.audit.sources import Book, read_books, read_calibration
from mia_core.model.options import ModelRef
from mia_core.palette import LABEL_COLOURS, MEMBER, NEUTRAL, NONMEMBER
from mia_core.runs.store import ResultsStore

from tests.runs.test_store_hardening import damaged_copies
from tests.support.app import APP
from ui.markdown import md

pytestmark = pytest.mark.integration  # the page loads the cached demo model
#: Report (HTML), Report (PDF) where Pango is installed, books.csv, snippets.csv.
DOWNLOADS = 3 if PDF_UNAVAILABLE else 4


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    path = tmp_path / "results.duckdb"
    monkeypatch.setenv("MIA_LENS_STORE", str(path))
    return path


def table_with(at: AppTest, column: str):
    """The first dataframe shown with this column (AppTest does not expose dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def audit_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.session_state["model_choice"] = "demo-known"  # chosen before the first run (sidebar reruns, see test_home)
    at.run()
    at.switch_page("app_pages/audit.py").run()
    assert not at.exception, at.exception
    return at


def wait_until_scored(path: Path, run_id: str, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        scored, planned = ResultsStore(path).progress(run_id)
        if planned and scored == planned:
            return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not finish in {timeout} s")


def test_audit_runs_in_the_background_and_a_new_session_reattaches(store_path):
    at = audit_page()
    at.number_input(key="audit_words").set_value(64)
    at.number_input(key="audit_max").set_value(2)
    at.button(key="audit_run").click().run()
    assert not at.exception, at.exception
    run_id = at.session_state["audit_run_id"]
    at.run()  # a rerun while the job works: the page keeps the run and shows progress or results
    assert not at.exception and at.session_state["audit_run_id"] == run_id
    wait_until_scored(store_path, run_id)

    at.run()
    assert not at.exception, at.exception
    books = table_with(at, "verdict")
    assert len(books) == 8 and {"rate", "prevalence", "p_adj", "verdict"} <= set(books.columns)
    assert all("proof" not in v for v in books["verdict"])
    labels = datasets.load("demo-books").set_index("id")["label"]
    prevalence = books.assign(label=books["book"].map(labels)).groupby("label")["prevalence"].mean()
    assert prevalence[1] > prevalence[0]  # demo-known was trained on the member plays
    assert len(at.get("plotly_chart")) >= 3  # calibration ROC, books, snippet scores of one book
    assert any('class="mia-heatmap"' in h.proto.body for h in at.get("html"))
    assert len(at.get("download_button")) == DOWNLOADS
    command = next(c.value for c in at.code if c.value.startswith("mia audit-books"))  # provenance: repeats this run
    assert "--calibration demo-books --books demo-books" in command and f"--job-id {run_id}" in command
    assert command.endswith(f"--output-dir audit-{run_id}") and "UPLOADED" not in command

    fresh = audit_page()  # another session: nothing in its state, the run is found in the shared store
    assert run_id in table_with(fresh, "run_id")["run_id"].tolist()
    fresh.selectbox(key="audit_open").set_value(run_id).run()
    fresh.button(key="audit_open_button").click().run()
    assert not fresh.exception, fresh.exception
    assert len(table_with(fresh, "verdict")) == 8
    fresh.radio(key="audit_rule").set_value("accuracy").run()  # re-analysed without re-scoring
    assert not fresh.exception, fresh.exception
    assert any(m.label == "Threshold" for m in fresh.metric)
    assert ResultsStore(store_path).runs()["n_scored"].iloc[0] == ResultsStore(store_path).progress(run_id)[1]


def scored_cli_run(path: Path, method: str) -> str:
    """A finished run of the demo books as the CLI could store it, with made-up scores (members higher)."""
    store = ResultsStore(path)
    settings = AuditSettings(method=method, params={}, snippet_words=64, max_snippets_per_book=1, n_boot=50)
    run_id = plan_audit(store, ModelRef("demo-known"), read_books("demo-books")[0],
                        read_calibration("demo-books")[0], settings, lm=SimpleNamespace(fingerprint="cli"))
    planned = store.pending(run_id)
    noise = np.random.default_rng(0).normal(0, 0.1, len(planned))
    scores = planned[["snippet_id"]].assign(score=planned["label"].astype(float).fillna(0.5).to_numpy() + noise,
                                            n_tokens=64, truncated=False)
    store.write_scores(run_id, scores, fingerprint="cli", method=method, params={}, code_version="test", session="test")
    return run_id


def test_a_run_whose_method_has_no_token_view_shows_its_snippets_as_text(store_path):
    run_id = scored_cli_run(store_path, "lowercase")  # needs a lowercased pass: no heatmap from the statistics
    at = audit_page()
    at.session_state["audit_run_id"] = run_id
    at.run()
    assert not at.exception, at.exception
    assert any("no per-token view" in c.value for c in at.caption)
    assert not any('class="mia-heatmap"' in h.proto.body for h in at.get("html"))
    assert len(at.get("download_button")) == DOWNLOADS


#: The colour each verdict's bars must have (palette.py: red member-like, blue non-member-like, grey undecided).
VERDICT_COLOUR = {"consistent with training": MEMBER, "no evidence found": NONMEMBER, "undecided (weak)": NEUTRAL,
                  "no verdict": NEUTRAL}


def hand_scored_run(path: Path, spec: str, books: list[Book], member: dict[str, int]) -> str:
    """A finished run scored by hand with a known truth: snippets of member books ≈ 1, of the others ≈ 0 (sd 0.1)."""
    store = ResultsStore(path)
    settings = AuditSettings(method="min_k_pp", params={"k": 0.2}, snippet_words=64, max_snippets_per_book=5, n_boot=50)
    run_id = plan_audit(store, ModelRef(spec), books, read_calibration("demo-books")[0],
                        settings, lm=SimpleNamespace(fingerprint="hand"))
    planned = store.pending(run_id)
    truth = planned["label"].astype(float).fillna(planned["book"].map(member)).to_numpy()
    noise = np.random.default_rng(1).normal(0, 0.1, len(planned))
    scores = planned[["snippet_id"]].assign(score=truth + noise, n_tokens=64, truncated=False)
    store.write_scores(run_id, scores, fingerprint="hand", method="min_k_pp", params={"k": 0.2}, code_version="test",
                       session="test")
    return run_id


def open_run(tiny_app, run_id: str) -> AppTest:
    at = tiny_app("app_pages/audit.py")
    at.session_state["audit_run_id"] = run_id
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.mark.skipif(bool(PDF_UNAVAILABLE), reason="needs Pango (make pdf-deps)")
def test_the_report_downloads_as_html_and_as_a_pdf(store_path, tiny_app, tiny_model_dir, monkeypatch):
    deferred = {}  # file name → (the callable a click runs, its MIME type)
    original = MediaFileManager.add_deferred

    def keep(self, data_callable, mimetype, coordinates, file_name=None, **kwargs):
        deferred[file_name] = (data_callable, mimetype)
        return original(self, data_callable, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", keep)
    given, add = [], MediaFileManager.add  # the names of downloads whose data is given at once (books.csv)

    def keep_name(self, data, mimetype, coordinates, file_name=None, **kwargs):
        given.append(file_name)
        return add(self, data, mimetype, coordinates, file_name, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add", keep_name)
    manifest = datasets.load("demo-books").set_index("id")["label"]
    run_id = hand_scored_run(store_path, str(tiny_model_dir), read_books("demo-books")[0], manifest.to_dict())
    at = open_run(tiny_app, run_id)
    assert [b.proto.label for b in at.get("download_button")][:2] == ["Report (HTML)", "Report (PDF)"]
    named = f"audit_{run_id}_{Path(tiny_model_dir).name}_"  # by run and model (a folder by its last part)
    make_pdf, mimetype = deferred[f"{named}report.pdf"]  # named like the HTML one, rendered on click only
    assert mimetype == "application/pdf" and f"{named}report.html" in deferred
    assert f"{named}snippets.csv" in deferred and f"{named}books.csv" in given
    data = make_pdf()
    assert data.startswith(b"%PDF-")
    pages = PdfReader(io.BytesIO(data)).pages
    text = " ".join(" ".join(page.extract_text() for page in pages).split())
    assert f"page {len(pages)} of {len(pages)}" in text and "consistent with training" in text


def books_chart(at: AppTest) -> dict:
    """The books chart's plotly JSON (the chart with the raw-rate trace)."""
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return next(s for s in specs if any(str(t.get("name", "")).startswith("raw rate") for t in s["data"]))


def test_demo_run_shows_verdicts_first_coloured_by_verdict_and_the_ground_truth(store_path, tiny_app, tiny_model_dir):
    manifest = datasets.load("demo-books").set_index("id")["label"]  # the adapter's training split, read directly
    run_id = hand_scored_run(store_path, str(tiny_model_dir), read_books("demo-books")[0], manifest.to_dict())
    at = open_run(tiny_app, run_id)

    shown_settings = next(c.value for c in at.caption if "word snippets · parameters" in c.value)
    assert md("k=0.2") in shown_settings and "{" not in shown_settings  # NAME=VALUE, not a raw dict
    books = table_with(at, "verdict")
    assert list(books.columns[:2]) == ["verdict", "book"] and "ground_truth" not in books.columns
    assert list(books.columns[2:4]) == ["p_adj", "p_value"]  # what the verdict rests on, in view at 1400 px
    shown = next(d for d in at.dataframe if "verdict" in d.value.columns)
    config = json.loads(shown.proto.columns)
    assert config["verdict"]["pinned"] is True and config["verdict"]["width"] == "medium"
    # known truth: the 4 member plays score ≈ 1, far above every held-out snippet; the 4 held-out plays ≈ 0
    verdict_of = dict(zip(books["book"], books["verdict"]))
    assert {b for b, v in verdict_of.items() if v == "consistent with training"} == set(manifest[manifest == 1].index) - {
        "richard-ii", "two-gentlemen-of-verona"}
    assert {b for b, v in verdict_of.items() if v == "no evidence found"} == {
        "the-merchant-of-venice", "antony-and-cleopatra", "henry-vi-part-2", "the-tempest"}

    chart = books_chart(at)
    bars = [t for t in chart["data"] if t["type"] == "bar"]
    assert {t["name"] for t in bars} == {"consistent with training", "no evidence found"}
    for trace in bars:
        assert trace["marker"]["color"] == VERDICT_COLOUR[trace["name"]]
        assert set(trace["y"]) == {b for b, v in verdict_of.items() if v == trace["name"]}
    assert chart["layout"]["yaxis"]["categoryarray"] == books["book"].tolist()[::-1]  # top bar = first table row
    words = next(t for t in chart["data"] if t.get("mode") == "text")  # the verdict written beside each bar
    assert all(text.startswith(f"{verdict_of[book]} · p(BH) ") for book, text in zip(words["y"], words["text"]))
    assert len(words["y"]) == len(books)

    at.toggle(key="audit_truth").set_value(True).run()
    assert not at.exception, at.exception
    books = table_with(at, "verdict")
    assert books.columns[0] == "verdict"
    assert dict(zip(books["book"], books["ground_truth"])) == {
        b: "in training" if manifest[b] == 1 else "held out" for b in books["book"]}
    stars = next(t for t in books_chart(at)["data"] if t["name"] == "ground truth: in demo-known's training")
    assert set(stars["y"]) == {b for b in books["book"] if manifest[b] == 1}
    assert stars["marker"]["color"] == LABEL_COLOURS[1]
    assert any("should find none" in i.value and "coriolanus" in i.value for i in at.info)

    snippets = [e for e in at.expander if e.label.startswith("Snippet ")]
    assert len(snippets) == 2 and not any(e.proto.expanded for e in snippets)  # collapsed until opened
    assert all(any('class="mia-heatmap"' in h.proto.body for h in e.get("html")) for e in snippets)
    first = books["book"].iloc[0]  # the drill-down opens on the first book: its verdict in words, no raw key
    summary = next(c.value for c in at.caption if c.value.startswith(f"**{first.replace('-', chr(92) + '-')}**"))
    full = {short: VERDICTS[key] for key, short in VERDICT_SHORT.items()}[books["verdict"].iloc[0]]
    assert f"**: {md(full)} " in summary and "FPR on the calibration books\\). Rate" in summary  # as books.csv, once
    assert summary.count(md(full)) == 1 and "adjusted p" in summary
    assert not any(c.value.endswith(("· evidence", "· none", "· weak", "· uninformative")) for c in at.caption)
    scores = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                  if json.loads(c.proto.spec)["layout"].get("xaxis", {}).get("tickformat") == "d")
    assert scores["layout"]["xaxis"]["dtick"] >= 1 and float(scores["layout"]["xaxis"]["dtick"]).is_integer()

    assert any(c.value.startswith("mia audit-books --model") and f"--job-id {run_id}" in c.value for c in at.code)
    at.toggle(key="audit_provenance_hashes").set_value(True).run()
    hashes = table_with(at, "sha256")
    assert len(hashes) == 12 and hashes["sha256"].str.fullmatch(r"[0-9a-f]{64}").all()  # 8 audited + 4 calibration
    assert hashes.groupby("role")["label"].apply(set).to_dict() == {  # words, no "None" for the audited books
        "audited": {""}, "calibration": {"known member", "known non-member"}}


def test_an_upload_gets_no_ground_truth_even_under_a_play_name(store_path, tiny_app, tiny_model_dir):
    plays = read_books("demo-books")[0]
    # named like a demo play, but its text is another play's words reversed: not the demo play
    books = [Book("coriolanus", " ".join(reversed(plays[4].text.split())), "upload.txt"),
             Book("my novel", plays[5].text, "novel.txt")]
    run_id = hand_scored_run(store_path, str(tiny_model_dir), books, {"coriolanus": 1, "my novel": 0})
    at = open_run(tiny_app, run_id)
    assert table_with(at, "verdict").columns[0] == "verdict"
    assert not [t for t in at.toggle if t.key == "audit_truth"]
    assert not any("ground truth" in str(t.get("name", "")) for t in books_chart(at)["data"])


def test_book_names_in_markdown_are_shown_as_themselves():
    hostile = '<a href="x">b</a> **bold** [link](javascript:alert(1)) $x$ _i_ # h `c` a\\b'
    rendered = MarkdownIt().renderInline(md(hostile))  # CommonMark, as Streamlit's Markdown reads it
    assert rendered == html.escape(hostile)


def test_another_programs_database_as_the_store_is_the_store_message_not_an_error(tmp_path, monkeypatch, tiny_app):
    """A DuckDB file with a `runs` table of its own used to reach the page as Streamlit's generic error."""
    path = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs (x INTEGER)")
    con.close()
    monkeypatch.setenv("MIA_LENS_STORE", str(path))
    at = tiny_app("app_pages/audit.py")
    assert not at.exception
    assert any("The results store cannot be read" in e.value for e in at.error)
    assert all(str(tmp_path) not in e.value for e in at.error)  # no server path


def test_a_damaged_store_is_the_store_message_not_an_error_and_is_left_as_it_was(tmp_path, monkeypatch, tiny_app):
    """A truncated store, or one with a block overwritten, opened and then failed on the runs table: Streamlit's
    generic error box."""
    for kind, path in damaged_copies(tmp_path).items():
        before = path.read_bytes()
        monkeypatch.setenv("MIA_LENS_STORE", str(path))
        at = tiny_app("app_pages/audit.py")
        assert not at.exception, kind
        shown = [e.value for e in at.error]
        assert len(shown) == 1 and "The results store cannot be read" in shown[0], (kind, shown)
        assert str(tmp_path) not in shown[0]  # no server path
        assert path.read_bytes() == before, kind

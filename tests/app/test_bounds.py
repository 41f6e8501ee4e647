"""Bounded work on the pages through AppTest: Explore's character cap and paged heatmap, hostile `?run=` links,
one upload folder per session, and background audits that wait for a free slot."""
from __future__ import annotations

import gc
import tempfile
import threading
import time
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.sources import Book
from mia_core.limits import MAX_BACKGROUND_JOBS, MAX_HEATMAP_TOKENS, MAX_REQUEST_CHARS
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore
from ui.jobs import job_threads, public_message, start_job, waiting_message

from tests.support.app import APP
from tests.support.tiny import random_texts

HOSTILE_RUN = "`x` **bold** <img src=x onerror=alert(1)> ../../etc/passwd"


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    path = tmp_path / "results.duckdb"
    monkeypatch.setenv("MIA_LENS_STORE", str(path))
    return path


def open_page(model_dir, page: str, query: dict | None = None) -> AppTest:
    """A session with the tiny model chosen before the first run (no demo model loaded), on `page`."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["model_choice"] = "other"
    at.session_state["model_other"] = str(model_dir)
    at.query_params.update(query or {})
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def shown_text(at: AppTest) -> list[str]:
    """Every message and text element the page drew (markdown, captions, alerts, code)."""
    kinds = ("markdown", "caption", "error", "warning", "info", "success", "code", "text")
    return [str(e.value) for kind in kinds for e in at.get(kind)]


def test_explore_caps_characters_of_the_text_area(tiny_model_dir):
    at = open_page(tiny_model_dir, "app_pages/explore.py")
    assert at.text_area(key="explore_text").proto.max_chars == MAX_REQUEST_CHARS
    # a crafted client sending more (AppTest's `input` would drop it, `set_value` does not) is cut on the server
    at.text_area(key="explore_text").set_value("w " * (MAX_REQUEST_CHARS // 2) + "x").run()
    assert not at.exception, at.exception
    assert len(at.text_area(key="explore_text").value) == MAX_REQUEST_CHARS  # uploads: check_request_chars


def test_explore_draws_a_long_text_a_page_at_a_time(tiny_model_dir):
    at = open_page(tiny_model_dir, "app_pages/explore.py")
    text = " ".join(random_texts(160, seed=4, min_words=20, max_words=20))  # ~3,400 words: over one page of tokens
    at.text_area(key="explore_text").input(text).run()
    at.button[0].click().run()
    assert not at.exception, at.exception
    page = at.selectbox(key="explore_heatmap_page")
    n_pages = len(page.options)
    assert n_pages >= 2
    drawn = [h.proto.body.count('class="mia-tok"') for h in at.get("html") if 'id="heatmap-min_k_pp"' in h.proto.body]
    assert drawn == [MAX_HEATMAP_TOKENS]
    counts = [MAX_HEATMAP_TOKENS]
    for i in range(1, n_pages):
        at.selectbox(key="explore_heatmap_page").select_index(i).run()
        assert not at.exception, at.exception
        counts += [h.proto.body.count('class="mia-tok"') for h in at.get("html")
                   if 'id="heatmap-min_k_pp"' in h.proto.body]
    assert all(c <= MAX_HEATMAP_TOKENS for c in counts) and len(counts) == n_pages
    n_scored = int(next(c.value for c in at.caption if "tokens scored" in c.value).split()[0])
    assert sum(counts) == n_scored  # the pages cover every scored token once


def test_hostile_run_link_is_refused_as_code_without_server_paths(tiny_model_dir, store_path):
    at = open_page(tiny_model_dir, "app_pages/audit.py", {"run": HOSTILE_RUN})
    assert not at.exception, at.exception
    assert any("not a run id" in e.value for e in at.error)
    assert [c.value for c in at.code] == [HOSTILE_RUN]  # shown verbatim as code, never rendered
    assert not any(HOSTILE_RUN in m.value for m in at.markdown)
    assert not any(str(store_path.parent) in s for s in shown_text(at))
    assert "audit_run_id" not in at.session_state

    missing = open_page(tiny_model_dir, "app_pages/audit.py", {"run": "abcdef012345"})  # well-formed, not stored
    assert any("No book-audit run" in e.value for e in missing.error)
    assert [c.value for c in missing.code] == ["abcdef012345"]
    assert not any(str(store_path.parent) in s for s in shown_text(missing))


def test_upload_folder_is_made_once_per_session_and_removed_with_it(tiny_model_dir, store_path, tmp_path, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    at = open_page(tiny_model_dir, "app_pages/audit.py")
    for _ in range(3):
        at.run()
    assert not at.exception, at.exception
    assert len(list(temp.glob("mia-audit-*"))) == 1  # one per session, not one per rerun
    del at
    gc.collect()
    assert list(temp.glob("mia-audit-*")) == []  # the session's state is gone: its folder too


def test_paths_are_cut_from_messages():
    assert public_message("/tmp/mia-audit-x1/books/a.zip: not a readable zip file") == "a.zip: not a readable zip file"
    assert public_message("OSError: [Errno 2] No such file: '/srv/models/m/config.json'") == \
        "OSError: [Errno 2] No such file: 'config.json'"
    assert public_message("see https://example.org/a/b and 1/2") == "see https://example.org/a/b and 1/2"


def test_second_background_job_waits_for_a_free_slot(tiny_model_dir, store_path):
    assert MAX_BACKGROUND_JOBS == 1
    release_a, release_b, order = threading.Event(), threading.Event(), []

    def work(name: str, release: threading.Event):
        def run() -> None:
            order.append(f"{name} started")
            release.wait(30)
            order.append(f"{name} ended")
        return run

    texts = random_texts(8, seed=9, min_words=30, max_words=30)
    books = [Book(f"b{i}", texts[i], "test") for i in range(2)]
    calibration = [Book(f"c{i}", texts[2 + i], "test", i % 2) for i in range(2)]
    run_id = plan_audit(ResultsStore(store_path), ModelRef(str(tiny_model_dir)), books, calibration,
                        AuditSettings(method="loss", params={}, snippet_words=10), lm=SimpleNamespace(fingerprint="fp"))
    try:
        first = start_job("busy-run", work("a", release_a))
        deadline = time.time() + 10
        while first.state != "running" and time.time() < deadline:
            time.sleep(0.01)
        second = start_job(run_id, work("b", release_b))
        time.sleep(0.2)
        assert first.state == "running" and second.state == "waiting" and order == ["a started"]
        assert waiting_message(second) == "waiting for a free slot (1 running)" and waiting_message(first) is None

        at = open_page(tiny_model_dir, "app_pages/audit.py", {"run": run_id})  # the page of the waiting run says so
        assert not at.exception, at.exception
        assert any("waiting for a free slot (1 running)" in e.value for e in at.info)

        release_a.set()
        first.thread.join(10)
        deadline = time.time() + 10
        while second.state != "running" and time.time() < deadline:
            time.sleep(0.01)
        assert second.state == "running" and order == ["a started", "a ended", "b started"]
        release_b.set()
        second.thread.join(10)
        assert second.state == "done" and order[-1] == "b ended"
    finally:
        release_a.set()
        release_b.set()
        for name in ("busy-run", run_id):
            job_threads().pop(name, None)

"""Book sources are read one book at a time while a run is planned (issue 29): a 2 GB source held whole peaked at
3.96 GB RSS. The run planned from a stream holds what a list of the same books gives (snippets, ids, hashes),
checked against a naive computation of the documented hashes, and the Python memory traced while a source of N
books of B characters is read and planned stays within a small multiple of B, not N × B.
"""
from __future__ import annotations

import hashlib
import json
import re
import tracemalloc
import zipfile

import pytest

from mia_core import load_model
from mia_core.audit.jobs import AuditSettings, plan_audit
from mia_core.audit.sources import read_audit_inputs, read_books, read_calibration
from mia_core.inputs.tables import InputError
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore

from tests.support.books import words
from tests.support.tiny import save_tiny_model

SETTINGS = AuditSettings(snippet_words=50, max_snippets_per_book=None)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return load_model(str(save_tiny_model(tmp_path_factory.mktemp("tiny"))), device="cpu")


def write_calibration(folder):
    for label, tag in (("members", "m"), ("non_members", "n")):
        (folder / label).mkdir(parents=True)
        for i in range(2):
            (folder / label / f"{tag}{i}.txt").write_text(words(120 + 30 * i, tag=f"{tag}{i}-"))
    return folder


def naive_snippets(text: str, size: int) -> list[str]:
    """Full `size`-word snippets cut at the words' bounds in the original text, word by word."""
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    return [text[spans[i][0]:spans[i + size - 1][1]] for i in range(0, len(spans) - size + 1, size)]


def test_a_streamed_plan_stores_the_snippets_and_hashes_of_the_books(tmp_path, lm):
    calibration = write_calibration(tmp_path / "cal")
    books = {"alpha": words(175, "a"), "beta": "Beta.\n\n" + words(60, "b") + "\n" + words(49, "c"), "gamma": words(30)}
    with zipfile.ZipFile(tmp_path / "books.zip", "w") as archive:
        for name, text in books.items():
            archive.writestr(f"{name}.txt", text)
        archive.writestr("cover.png", b"\x89PNG")
    store = ResultsStore(tmp_path / "r.duckdb")
    inputs = read_audit_inputs(tmp_path / "books.zip", calibration)
    run_id = plan_audit(store, ModelRef("tiny"), inputs.books, inputs.calibration, SETTINGS, inputs.problems, lm=lm)

    stored = store.results(run_id, with_texts=True).set_index("snippet_id")
    cal_texts = {f"{tag}{i}": words(120 + 30 * i, tag=f"{tag}{i}-") for tag in "mn" for i in range(2)}
    rows = [("calibration", f"{name}#{j:05d}", 1 if name[0] == "m" else 0, snippet)
            for name, text in cal_texts.items() for j, snippet in enumerate(naive_snippets(text, 50))]
    rows += [("audit", f"{name}#{j:05d}", None, snippet)
             for name, text in books.items() for j, snippet in enumerate(naive_snippets(text, 50))]
    assert sorted(stored.index) == sorted(r[1] for r in rows)
    assert all(stored.loc[sid, "text"] == text and stored.loc[sid, "role"] == role for role, sid, _, text in rows)
    sha = {r[1]: hashlib.sha256(r[3].encode()).hexdigest() for r in rows}
    run_digest = hashlib.sha256(json.dumps([lm.fingerprint, SETTINGS.scoring_key()], sort_keys=True).encode())
    for role, sid, label, _ in rows:  # the run id: every row in plan order (calibration books, then audited ones)
        run_digest.update(f"{role}\t{sid}\t{'<NA>' if label is None else label}\t{sha[sid]}\n".encode())
    assert run_id == run_digest.hexdigest()[:12]
    plan = store.stored_plan(run_id)[1]
    for role in ("calibration", "audit"):
        lines = sorted((sid, "" if label is None else str(label)) for r, sid, label, _ in rows if r == role)
        expected = hashlib.sha256("".join(f"{sid}\t{label}\t{sha[sid]}\n" for sid, label in lines).encode())
        assert plan[f"{role} books"] == expected.hexdigest()
    problems = store.problems(run_id)
    assert sorted(problems["book"]) == ["cover", "gamma"]
    assert "30 words, fewer than one 50-word snippet" in problems.set_index("book").loc["gamma", "message"]

    # the same books given as lists plan the same run, and planning it again resumes it
    again = plan_audit(store, ModelRef("tiny"), read_books(tmp_path / "books.zip")[0],
                       read_calibration(calibration)[0], SETTINGS, lm=lm)
    assert again == run_id and len(store.results(run_id)) == len(rows)
    assert not list(tmp_path.glob(".mia-plan-*"))  # the staged snippets are removed


def test_what_only_reading_finds_stops_the_plan_with_nothing_stored(tmp_path, lm):
    calibration = write_calibration(tmp_path / "cal")
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "empty.txt").write_text("  ")
    (tmp_path / "books" / "binary.txt").write_bytes(b"\x00\x01" * 100)
    store = ResultsStore(tmp_path / "r.duckdb")
    inputs = read_audit_inputs(tmp_path / "books", calibration)  # the folder has book files: opened
    with pytest.raises(InputError, match="books: no readable book .*binary.txt: looks binary"):
        plan_audit(store, ModelRef("tiny"), inputs.books, inputs.calibration, SETTINGS, lm=lm)
    assert store.runs().empty and not list(tmp_path.glob(".mia-plan-*"))
    with pytest.raises(InputError, match="nope: no such file or folder"):
        read_audit_inputs(tmp_path / "books", tmp_path / "nope")  # a missing path: refused when opened


def test_reading_and_planning_holds_one_book_not_the_source(tmp_path, lm):
    calibration = write_calibration(tmp_path / "cal")
    n_books, book_chars = 8, 3_000_000
    folder = tmp_path / "books"
    folder.mkdir()
    n_snippets = 4  # the calibration books' (120 to 150 words each)
    for i in range(n_books):  # 3 MB of distinct words per book
        text = words(book_chars // 9, tag=f"b{i}-")[:book_chars]
        (folder / f"book{i}.txt").write_text(text)
        n_snippets += len(text.split()) // 100
    del text
    store = ResultsStore(tmp_path / "r.duckdb")
    settings = AuditSettings(snippet_words=100)
    tracemalloc.start()
    try:
        inputs = read_audit_inputs(folder, calibration)
        run_id = plan_audit(store, ModelRef("tiny"), inputs.books, inputs.calibration, settings, lm=lm)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert store.progress(run_id)[1] == n_snippets  # every book was planned
    # the whole source is 24 MB of text: held whole (with its snippets) it is over 48 MB; one book at a time, one
    # book's bytes, text and snippets, and the rows waiting to be staged (`staging.FLUSH_CHARS`) at most
    assert peak < 5 * book_chars, f"{peak / 1e6:.1f} MB traced for books of {book_chars / 1e6:.0f} MB"


def test_a_book_named_as_a_calibration_book_is_a_problem_not_a_crash(tmp_path, lm):
    calibration = write_calibration(tmp_path / "cal")
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "m0.txt").write_text(words(100, "x"))  # the name of a member calibration book
    (tmp_path / "books" / "other.txt").write_text(words(100, "y"))
    store = ResultsStore(tmp_path / "r.duckdb")
    inputs = read_audit_inputs(tmp_path / "books", calibration)
    run_id = plan_audit(store, ModelRef("tiny"), inputs.books, inputs.calibration, SETTINGS, lm=lm)
    stored = store.results(run_id, with_texts=True)
    assert stored.loc[stored["snippet_id"] == "m0#00000", "text"].tolist() == [naive_snippets(words(120, "m0-"), 50)[0]]
    assert sorted(stored.loc[stored["role"] == "audit", "snippet_id"]) == ["other#00000", "other#00001"]
    problem = store.problems(run_id).set_index("book").loc["m0"]
    assert problem["role"] == "audit" and "a calibration book has the same name" in problem["message"]

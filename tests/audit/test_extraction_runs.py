"""A book audit's extraction as units of work in the results store: the units cover every window once, their
figures equal the extraction API's on each book's text, two processes split the units, and a run killed by SIGKILL
resumes with only its unfinished units computed, ending with the figures of an uninterrupted run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mia_core import load_model
from mia_core.audit.extraction import extraction_evidence
from mia_core.audit.extraction_runs import extraction_result, plan_extraction, run_extraction
from mia_core.extract import ExtractionSettings, extract_texts
from mia_core.extract.windows import layout_text
from mia_core.model.options import ModelRef
from mia_core.runs.extraction_units import UNIT_WINDOWS, ExtractionUnits
from mia_core.runs.store import ResultsStore

from tests.support.store_poll import wait_units
from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer

ROOT = Path(__file__).resolve().parents[2]
#: Every window of these books, one token apart, is its own prefix of 12 and suffix of 8 tokens; the whole
#: vocabulary is the top k, so every p_z is finite and the figures compare numbers, not −inf.
SETTINGS = ExtractionSettings(prefix=12, suffix=8, stride=1, top_k=300)


@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "tiny-model"
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=0).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def library(n_words: int) -> list[tuple[str, str, str]]:
    """An audited book of about `n_words` words, a member and a non-member calibration book, and one too short for a
    window."""
    text = lambda seed, words: " ".join(random_texts(max(1, words // 10), seed=seed, min_words=10, max_words=10))  # noqa: E731
    return [("long", "audited", text(1, n_words)), ("short", "audited", "Too short."),
            ("member", "calibration member", text(2, n_words // 2)),
            ("other", "calibration non-member", text(3, n_words // 3))]


def test_units_cover_every_window_once_and_give_the_apis_figures(model_dir, tmp_path):
    lm = load_model(str(model_dir))
    books = library(200)  # ≈ 730 tokens: several units of UNIT_WINDOWS windows for the long book
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_extraction(store, ModelRef(str(model_dir)), lm, lambda: books, SETTINGS)
    units = ExtractionUnits(store.path)
    _, planned = units.progress(run_id)
    layouts = [layout_text(lm, text, SETTINGS) for _, _, text in books]
    assert planned == sum(-(-len(layout.starts) // UNIT_WINDOWS) for layout in layouts) and planned >= 5
    assert plan_extraction(store, ModelRef(str(model_dir)), lm, lambda: books, SETTINGS) == run_id  # same plan: resumed
    assert run_extraction(store, run_id, ModelRef(str(model_dir)), lm=lm) == planned
    assert run_extraction(store, run_id, ModelRef(str(model_dir)), lm=lm) == 0  # nothing pending: nothing computed
    api = extract_texts(lm, [text for _, _, text in books], SETTINGS, cache=False)
    for (name, _, _), layout, want in zip(books, layouts, api):
        spans, log10_pz, greedy, _ = units.book_windows(run_id, name)
        for column, values in layout.spans().items():  # every window once, in order, where it lies
            np.testing.assert_array_equal(spans.get(column, np.empty(0, np.int64)), values)
        np.testing.assert_allclose(log10_pz, want.windows["log10_pz"].to_numpy(), rtol=0, atol=1e-9)
        np.testing.assert_array_equal(greedy, want.windows["greedy"].to_numpy())
    evidence = extraction_result(store, run_id)
    reference = extraction_evidence(lm, books, SETTINGS)  # per book, through the extraction API
    pd.testing.assert_frame_equal(evidence.table, reference.table, check_exact=False, rtol=1e-9)
    for name in reference.strips:
        np.testing.assert_allclose(evidence.strips[name], reference.strips[name], rtol=0, atol=1e-9)
    assert evidence.table["extraction_windows"].tolist() == [len(layout.starts) for layout in layouts]
    assert store.run(run_id)["status"] == "done"


WORKER = textwrap.dedent("""
    import sys
    from mia_core.audit.extraction_runs import run_extraction
    from mia_core.model.options import ModelRef
    from mia_core.runs.store import ResultsStore
    print(run_extraction(ResultsStore(sys.argv[1]), sys.argv[2], ModelRef(sys.argv[3])))
""")


def python(*args, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(cache)}
    return subprocess.Popen([sys.executable, *map(str, args)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_two_processes_split_the_units(model_dir, tmp_path):
    lm = load_model(str(model_dir))
    books = library(1500)
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_extraction(store, ModelRef(str(model_dir)), lm, lambda: books, SETTINGS)
    _, planned = ExtractionUnits(store.path).progress(run_id)
    procs = [python("-c", WORKER, store.path, run_id, model_dir, cache=tmp_path / "cache") for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    computed = [int(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sum(computed) == planned and min(computed) >= 1, computed  # each unit once, both took part
    stored = ExtractionUnits(store.path).results_frame(run_id)
    assert len(stored) == planned and stored["session"].nunique() == 2
    reference = extraction_evidence(lm, books, SETTINGS)
    pd.testing.assert_frame_equal(extraction_result(store, run_id).table, reference.table, check_exact=False,
                                  rtol=1e-9)


def write_books(folder: Path) -> tuple[Path, Path]:
    """A calibration table and a table of books to audit for the CLI (snippets of 20 words)."""
    texts = random_texts(120, seed=11, min_words=20, max_words=20)
    cal = pd.DataFrame({"book": [f"c{i // 20}" for i in range(40)], "text": texts[:40],
                        "label": [1 if i < 20 else 0 for i in range(40)]})
    books = pd.DataFrame({"book": [f"b{i // 40}" for i in range(80)], "text": texts[40:]})
    cal.to_csv(folder / "cal.csv", index=False)
    books.to_csv(folder / "books.csv", index=False)
    return folder / "cal.csv", folder / "books.csv"


def mia(*args, cache: Path) -> subprocess.Popen:
    return python("-m", "mia_core", *args, cache=cache)


def test_sigkill_mid_extraction_then_resume_equals_an_uninterrupted_run(model_dir, tmp_path):
    cal, books = write_books(tmp_path)
    args = ["audit-books", "--model", model_dir, "--calibration", cal, "--books", books, "--snippet-words", "20",
            "--n-boot", "100", "--extraction", "--prefix", "12", "--suffix", "8", "--stride", "1", "--top-k", "300"]
    store_path = tmp_path / "killed.duckdb"
    proc = mia(*args, "--output-dir", tmp_path / "killed", "--store", store_path, cache=tmp_path / "cache-a")
    wait_units(store_path, proc, 2, deadline_s=300)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()[1][-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    units = ExtractionUnits(store_path)
    run_id = ResultsStore(store_path).runs(kind="book-extraction")["run_id"].iloc[0]
    before = units.results_frame(run_id).set_index("unit_id")
    done, planned = units.progress(run_id)
    assert 2 <= done == len(before) < planned

    resumed = mia(*args, "--output-dir", tmp_path / "resumed", "--store", store_path, cache=tmp_path / "cache-a")
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-2000:]
    assert f"extraction job {run_id}: {planned} units" in err and f"{done} already computed (resuming)" in err
    after = units.results_frame(run_id).set_index("unit_id")
    assert len(after) == planned
    pd.testing.assert_frame_equal(after.loc[before.index], before)  # nothing stored was recomputed

    clean = mia(*args, "--output-dir", tmp_path / "clean", "--store", tmp_path / "clean.duckdb",
                cache=tmp_path / "cache-b")
    _, err = clean.communicate(timeout=600)
    assert clean.returncode == 0, err[-2000:]
    a, b = pd.read_csv(tmp_path / "resumed" / "extraction.csv"), pd.read_csv(tmp_path / "clean" / "extraction.csv")
    assert len(a) == 5 and (a["extraction_windows"] > 0).all()
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9)

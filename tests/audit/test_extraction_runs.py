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
from tests.support.tiny import random_texts

ROOT = Path(__file__).resolve().parents[2]
#: Every window of these books, one token apart, is its own prefix of 12 and suffix of 8 tokens; the whole
#: vocabulary is the top k, so every p_z is finite and the figures compare numbers, not −inf.
SETTINGS = ExtractionSettings(prefix=12, suffix=8, stride=1, top_k=300)
#: Narrower windows for the runs of several processes: a unit of 256 costs a few thousand tokens fed.
QUICK = ExtractionSettings(prefix=6, suffix=4, stride=1, top_k=300)


def library(n_words: int) -> list[tuple[str, str, str]]:
    """An audited book of about `n_words` words, a member and a non-member calibration book, and one too short for a
    window."""
    def text(seed: int, words: int) -> str:
        return " ".join(random_texts(max(1, words // 10), seed=seed, min_words=10, max_words=10))

    return [("long", "audited", text(1, n_words)), ("short", "audited", "Too short."),
            ("member", "calibration member", text(2, n_words // 2)),
            ("other", "calibration non-member", text(3, n_words // 3))]


def test_units_cover_every_window_once_and_give_the_apis_figures(model_dir, tmp_path):
    lm = load_model(str(model_dir))
    books = library(250)  # ≈ 900 tokens: several units of UNIT_WINDOWS windows for the long book
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
    import sys, time
    from pathlib import Path
    from mia_core.audit.extraction_runs import run_extraction
    from mia_core.model.options import ModelRef
    from mia_core.runs.store import ResultsStore
    store, run_id, model, ready, others = sys.argv[1:6]
    Path(ready).touch()  # imports done: start together with the other workers (their start-up is not the test)
    while not all(Path(p).exists() for p in others.split(",") if p):
        time.sleep(0.05)
    print(run_extraction(ResultsStore(store), run_id, ModelRef(model)))
""")


def workers(n: int, store: ResultsStore, run_id: str, model_dir: Path, tmp_path: Path) -> list[subprocess.Popen]:
    """`n` processes computing the run's pending units, started together."""
    ready = [tmp_path / f"ready-{i}" for i in range(n)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(tmp_path / "cache")}
    return [subprocess.Popen([sys.executable, "-c", WORKER, str(store.path), run_id, str(model_dir), str(ready[i]),
                              ",".join(map(str, ready))], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for i in range(n)]


def planned_run(model_dir: Path, tmp_path: Path, n_words: int):
    """(model, books, store, run id, units planned) of a library's extraction, planned and not computed."""
    lm = load_model(str(model_dir))
    books = library(n_words)
    store = ResultsStore(tmp_path / "r.duckdb")
    run_id = plan_extraction(store, ModelRef(str(model_dir)), lm, lambda: books, QUICK)
    return lm, books, store, run_id, ExtractionUnits(store.path).progress(run_id)[1]


def test_two_processes_split_the_units(model_dir, tmp_path):
    lm, books, store, run_id, planned = planned_run(model_dir, tmp_path, 400)
    assert planned >= 8
    procs = workers(2, store, run_id, model_dir, tmp_path)
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outputs]
    computed = [int(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert sum(computed) == planned and min(computed) >= 1, computed  # each unit once, both took part
    stored = ExtractionUnits(store.path).results_frame(run_id)
    assert len(stored) == planned and stored["session"].nunique() == 2
    reference = extraction_evidence(lm, books, QUICK)  # one process, through the extraction API
    pd.testing.assert_frame_equal(extraction_result(store, run_id).table, reference.table, check_exact=False,
                                  rtol=1e-9)


def test_sigkill_mid_extraction_then_resume_equals_an_uninterrupted_run(model_dir, tmp_path):
    lm, books, store, run_id, planned = planned_run(model_dir, tmp_path, 400)
    proc = workers(1, store, run_id, model_dir, tmp_path)[0]
    wait_units(store.path, proc, 2, deadline_s=300)
    assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()[1][-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    units = ExtractionUnits(store.path)
    before = units.results_frame(run_id).set_index("unit_id")
    done, _ = units.progress(run_id)
    assert 2 <= done == len(before) < planned
    assert store.run(run_id)["status"] == "interrupted"  # its process is gone (shown so, nothing written)

    assert run_extraction(store, run_id, ModelRef(str(model_dir)), lm=lm) == planned - done  # the claims of the dead
    after = units.results_frame(run_id).set_index("unit_id")  # process lapse at once: only the rest is computed
    assert len(after) == planned
    pd.testing.assert_frame_equal(after.loc[before.index], before)  # nothing stored was recomputed
    reference = extraction_evidence(lm, books, QUICK)  # uninterrupted, through the extraction API
    pd.testing.assert_frame_equal(extraction_result(store, run_id).table, reference.table, check_exact=False,
                                  rtol=1e-9)

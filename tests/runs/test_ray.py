"""The Ray backend on a local Ray instance (2 CPUs, loopback): same scores as the local path, order, retries, CLI;
an audit's extraction units computed by the actors."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mia_core
from mia_core.runs import ray_driver as ray_backend
from mia_core.runs import ray_worker, stats_task
from mia_core.audit.extraction import extraction_evidence
from mia_core.audit.extraction_runs import book_extraction, extraction_result, plan_extraction, run_extraction
from mia_core.audit.jobs import AuditSettings, audit_result, plan_audit, run_scoring
from mia_core.extract import ExtractionSettings
from mia_core.runs.extraction_units import ExtractionUnits
from mia_core.audit.sources import Book
from mia_core.model.options import ModelRef
from mia_core.runs.store import ResultsStore
from mia_core.runs.ray_driver import RayOptions, WorkerError
from mia_core.runs.ray_worker import FAIL_ENV
from mia_core.scoring import score_texts, text_stats
from mia_core.model.stats_cache import StatsCache

from tests.support.cli_runner import run_cli
from tests.support.tiny import random_texts, tiny_llama, tiny_tokenizer

# read when ray is imported: a local instance then binds to and talks on 127.0.0.1 only
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray", reason='the Ray backend is optional: pip install "mia-lens[scale]"')
#: One Ray instance at a time: the Ray tests run on one xdist worker (an instance is sized to both CPUs).
pytestmark = pytest.mark.xdist_group("ray")

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = AuditSettings(method="min_k_pp", params={"k": 0.2}, snippet_words=20, n_boot=200, batch_snippets=4)
METHODS = ["loss", "zlib", "min_k", "min_k_pp", "lowercase"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local Ray instance on 127.0.0.1 whose workers keep their own statistics cache; yields its address."""
    with pytest.MonkeyPatch.context() as env:  # a module's fixture: the function-scoped monkeypatch is not at hand
        env.setenv("MIA_LENS_CACHE", str(tmp_path_factory.mktemp("worker-cache")))
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # workers inherit the env
        try:
            address = ray.get_runtime_context().gcs_address
            assert address.startswith("127.0.0.1:"), address
            yield address
        finally:
            ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-model")
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=0, max_positions=64).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """This process's caches (workers started with the cluster keep the cluster's)."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def driver_lm(model_dir, tmp_path):
    """The model on the driver, with a statistics cache of its own (the workers never read it)."""
    lm = mia_core.load_model(str(model_dir))
    lm.stats_cache = StatsCache(tmp_path / "driver-stats")
    return lm


def test_ray_scores_equal_local_in_input_order(cluster, driver_lm):
    texts = random_texts(30, seed=5, min_words=3, max_words=30) + [" ".join(random_texts(12, seed=6))]  # the last is slid
    options = RayOptions(chunk_tokens=256, actors=2)  # several chunks, cut out of input order (longest first)
    local = score_texts(driver_lm, texts, METHODS, k=0.2)
    remote = score_texts(driver_lm, texts, METHODS, k=0.2, backend="ray", ray_options=options)
    assert list(remote.columns) == METHODS and len(remote) == len(texts)
    np.testing.assert_allclose(remote.to_numpy(), local.to_numpy(), atol=1e-4, rtol=0)
    assert np.ptp(local["loss"].to_numpy()) > 0.1  # rows differ, so equal rows mean the same order
    assert driver_lm.token_stats([texts[-1]])[0].long_text == "sliding"


def test_stats_travel_as_compact_arrays(driver_lm):
    texts = ["A short one.", " ".join(random_texts(12, seed=6)), ""]
    for want in driver_lm.token_stats(texts):
        payload = stats_task.pack_stats(want)
        got = stats_task.unpack_stats(payload, want.text)
        for name in (f.name for f in dataclasses.fields(want) if f.name != "extra"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        # per-token arrays (≈ 60 bytes a token plus its string) and fixed headers: no vocabulary-wide row (1,200 bytes a token)
        assert len(payload) < 4_000 + 80 * want.n_scored


def test_worker_reports_errors_per_row_and_refuses_another_model(driver_lm, model_dir, tmp_path):
    """The actor class in-process: a failing chunk or a different model comes back as error rows, never raised."""
    job = {"task": stats_task.stats_task, "failed_rows": stats_task.stats_failed, "model": ModelRef(str(model_dir)),
           "fingerprint": driver_lm.fingerprint, "bos": "auto", "long_text": "sliding"}
    batch = {"chunk": np.array([3, 4]), "ids": np.array([[7, 2], [5, 6]]),
             "texts": np.array([["Seven.", "Two."], ["Five.", "Six."]], dtype=object)}
    out = ray_worker.ChunkWorker(job, drill=(4,))(batch)
    assert out["id"].tolist() == [7, 2, 5, 6] and out["chunk"].tolist() == [3, 3, 4, 4]
    assert out["error"][:2].tolist() == ["", ""] and "failure drill" in out["error"][2]
    want = driver_lm.token_stats(["Seven.", "Two."])
    np.testing.assert_allclose(stats_task.unpack_stats(out["payload"][0], "Seven.").logprob, want[0].logprob, atol=1e-5)
    other = tmp_path / "other-model"
    tok = tiny_tokenizer(300)
    tiny_llama(len(tok), seed=1, max_positions=64).save_pretrained(other)
    tok.save_pretrained(other)
    out = ray_worker.ChunkWorker({**job, "model": ModelRef(str(other))})(batch)
    assert all("fingerprint" in e for e in out["error"])
    out = ray_worker.ChunkWorker({**job, "model": ModelRef(str(tmp_path / "missing"))})(batch)
    assert all("model folder not found" in e for e in out["error"])


def library() -> tuple[list[Book], list[Book]]:
    texts = random_texts(48, seed=11, min_words=20, max_words=20)
    calibration = [Book(f"cal-{i}", "\n".join(texts[i * 8:(i + 1) * 8]), "test", i % 2) for i in range(4)]
    audit = [Book(f"book-{i}", "\n".join(texts[32 + i * 8:40 + i * 8]), "test") for i in range(2)]
    return calibration, audit


def test_audit_job_on_ray_keeps_finished_batches_and_equals_local(cluster, driver_lm, model_dir, tmp_path, monkeypatch):
    calibration, audit = library()
    local_store, ray_store = ResultsStore(tmp_path / "local.duckdb"), ResultsStore(tmp_path / "ray.duckdb")
    local_id = plan_audit(local_store, ModelRef(str(model_dir)), audit, calibration, SETTINGS, lm=driver_lm)
    run_scoring(local_store, local_id, ModelRef.of(driver_lm), lm=driver_lm)
    local = audit_result(local_store, local_id)

    run_id = plan_audit(ray_store, ModelRef(str(model_dir)), audit, calibration, SETTINGS, backend="ray", lm=driver_lm)
    assert run_id == local_id  # the job's identity does not depend on the backend
    _, planned = ray_store.progress(run_id)
    n_chunks = -(-planned // SETTINGS.batch_snippets)
    passes = []
    one_pass = ray_backend._one_pass
    monkeypatch.setattr(ray_backend, "_one_pass", lambda ray, chunks, *a: passes.append(sorted(chunks)) or one_pass(ray, chunks, *a))

    # chunk 1 fails and is not retried: the run stops as failed, every other batch is stored
    monkeypatch.setenv(FAIL_ENV, "1")
    with pytest.raises(WorkerError, match="4 of 48 snippets failed .* failure drill"):
        run_scoring(ray_store, run_id, ModelRef.of(driver_lm), backend="ray", ray_options=RayOptions(retries=0, actors=1))
    assert passes == [list(range(n_chunks))]
    run = ray_store.run(run_id)
    assert run["status"] == "failed" and "run the job again" in run["message"] and run["backend"] == "ray"
    kept = ray_store.results(run_id).dropna(subset=["score"])
    assert len(kept) == planned - SETTINGS.batch_snippets

    # run again: only the missing batch is scored, and the run completes
    monkeypatch.delenv(FAIL_ENV)
    passes.clear()
    assert run_scoring(ray_store, run_id, ModelRef.of(driver_lm), backend="ray") == SETTINGS.batch_snippets
    assert passes == [[0]]  # the only pending chunk
    assert ray_store.run(run_id)["status"] == "scored"
    after = ray_store.results(run_id).set_index("snippet_id")
    pd.testing.assert_series_equal(after.loc[kept["snippet_id"], "session"], kept.set_index("snippet_id")["session"])

    result = audit_result(ray_store, run_id)
    assert result.run["backend"] == "ray" and local.run["backend"] == "local"
    pd.testing.assert_frame_equal(result.snippets[["snippet_id", "book", "position"]], local.snippets[["snippet_id", "book", "position"]])
    np.testing.assert_allclose(result.snippets["score"], local.snippets["score"], atol=1e-4, rtol=0)
    assert (result.snippets["n_tokens"] == local.snippets["n_tokens"]).all()
    pd.testing.assert_frame_equal(result.books, local.books, check_exact=False, atol=1e-4)


def mia(*args, cache: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`mia ARGS…` in a process of its own, as a user runs it."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "MIA_LENS_CACHE": str(cache), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mia_core", *map(str, args)], env=full_env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_cli_audit_and_score_on_the_cluster(cluster, driver_lm, model_dir, tmp_path):
    calibration, audit = library()
    cal = pd.DataFrame({"book": [b.name for b in calibration], "text": [b.text for b in calibration],
                        "label": [b.label for b in calibration]})
    books = pd.DataFrame({"book": [b.name for b in audit], "text": [b.text for b in audit]})
    cal.to_csv(tmp_path / "cal.csv", index=False)
    books.to_csv(tmp_path / "books.csv", index=False)
    store = tmp_path / "r.duckdb"
    proc = mia("audit-books", "--model", model_dir, "--calibration", tmp_path / "cal.csv", "--books", tmp_path / "books.csv",
               "--snippet-words", 20, "--n-boot", 200, "--output-dir", tmp_path / "out", "--store", store,
               "--backend", "ray", "--ray-address", cluster, "--ray-actors", 1, "--extraction", "--prefix", 12,
               "--suffix", 8, "--stride", 4, "--top-k", 300, cache=tmp_path / "cli-cache", env={FAIL_ENV: "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 of 3 chunks failed on the Ray workers (first error: RuntimeError: failure drill" in proc.stderr
    assert "retrying them (attempt 2 of 2)" in proc.stderr  # and the run still completed
    runs = ResultsStore(store).runs(kind="book-audit")  # what the dashboard's Book-audit page lists
    assert runs["backend"].tolist() == ["ray"] and runs["status"].tolist() == ["done"]
    snippets = ResultsStore(store).results(runs["run_id"].iloc[0])
    texts = ResultsStore(store).snippet_texts(runs["run_id"].iloc[0], snippets["snippet_id"])  # results() has no texts
    direct = score_texts(driver_lm, texts.tolist(), ["min_k_pp"], k=0.2, long_text="truncate")["min_k_pp"]
    np.testing.assert_allclose(snippets["score"].to_numpy(), direct.to_numpy(), atol=1e-4, rtol=0)
    assert (tmp_path / "out" / "report.html").exists()
    extraction = ResultsStore(store).runs(kind="book-extraction")  # its units computed by the actors too
    assert extraction["backend"].tolist() == ["ray"] and extraction["status"].tolist() == ["done"]
    books_x = [(b.name, "audited", b.text) for b in audit] + [
        (b.name, "calibration member" if b.label else "calibration non-member", b.text) for b in calibration]
    local_x = extraction_evidence(driver_lm, books_x, ExtractionSettings(prefix=12, suffix=8, stride=4, top_k=300))
    shown = pd.read_csv(tmp_path / "out" / "extraction.csv")
    assert shown["book"].tolist() == local_x.table["book"].tolist()
    for column in ("extraction_windows", "share_pz_ge_0.001", "share_greedy", "passages"):
        np.testing.assert_array_equal(shown[column].to_numpy(), local_x.table[column].to_numpy())
    np.testing.assert_allclose(shown["max_log10_pz"], local_x.table["max_log10_pz"], rtol=0, atol=1e-6)

    texts = pd.DataFrame({"text": random_texts(12, seed=21)})
    texts.to_csv(tmp_path / "texts.csv", index=False)
    code, _, err = run_cli("score", "--model", model_dir, "--input", tmp_path / "texts.csv", "--output",
                           tmp_path / "scores.csv", "--methods", "loss,min_k_pp", "--backend", "ray", "--ray-actors", 1)
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "scores.csv")
    local = score_texts(driver_lm, texts["text"].tolist(), ["loss", "min_k_pp"], k=0.2)
    np.testing.assert_allclose(scores[["loss", "min_k_pp"]].to_numpy(), local.to_numpy(), atol=1e-4, rtol=0)
    assert scores["n_tokens"].tolist() == [s.n_scored for s in driver_lm.token_stats(texts["text"].tolist())]




def test_cli_errors_without_ray_or_with_an_unknown_backend(model_dir, tmp_path, monkeypatch):
    texts = tmp_path / "t.txt"
    texts.write_text("One text to score.")
    common = ["score", "--model", model_dir, "--input", texts, "--output", tmp_path / "s.csv"]
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    code, _, err = run_cli(*common, "--backend", "ray")
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith('error: the Ray backend needs Ray: pip install "mia-lens[scale]"')
    code, _, err = run_cli(*common, "--backend", "spark")
    assert code == 2 and "error: --backend must be one of local, ray" in err
    code, _, err = run_cli(*common, "--ray-address", "127.0.0.1:1")
    assert code == 2 and "error: --ray-address and --ray-actors need --backend ray" in err


def test_extraction_units_on_ray_actors_give_the_local_figures(cluster, driver_lm, model_dir, tmp_path, monkeypatch):
    """Ray model actors compute an extraction run's units (one failing once, retried); the figures are the local
    run's, every unit stored once."""
    calibration, audit = library()
    books = [(b.name, "audited", b.text) for b in audit] + [
        (b.name, "calibration member" if b.label else "calibration non-member", b.text) for b in calibration]
    settings = ExtractionSettings(prefix=12, suffix=8, stride=1, top_k=300)  # every p_z finite: numbers compared
    local_store, ray_store = ResultsStore(tmp_path / "local.duckdb"), ResultsStore(tmp_path / "ray.duckdb")
    local = book_extraction(local_store, ModelRef(str(model_dir)), driver_lm, lambda: books, settings)
    run_id = plan_extraction(ray_store, ModelRef(str(model_dir)), driver_lm, lambda: books, settings, backend="ray")
    _, planned = ExtractionUnits(ray_store.path).progress(run_id)
    assert planned >= 6
    passes = []
    one_pass = ray_backend._one_pass
    monkeypatch.setattr(ray_backend, "_one_pass", lambda ray, chunks, *a: passes.append(sorted(chunks)) or one_pass(ray, chunks, *a))
    monkeypatch.setenv(FAIL_ENV, "1")  # unit 1's chunk fails on its first attempt, then is retried
    computed = run_extraction(ray_store, run_id, ModelRef(str(model_dir)), backend="ray",
                              ray_options=RayOptions(actors=2))
    assert computed == planned and passes == [list(range(planned)), [1]]
    assert ray_store.run(run_id)["backend"] == "ray"
    on_ray = extraction_result(ray_store, run_id)
    counts = ["book", "role", "extraction_windows", "passages", "passage_chars", "longest_passage_chars"]
    pd.testing.assert_frame_equal(on_ray.table[counts], local.table[counts])
    shares = [c for c in local.table.columns if c.startswith("share_") and not c.endswith("_ci")]
    pd.testing.assert_frame_equal(on_ray.table[shares], local.table[shares])  # the same windows over each threshold
    np.testing.assert_allclose(on_ray.table["max_log10_pz"], local.table["max_log10_pz"], rtol=0, atol=1e-6)
    for name, _, _ in books:
        _, pz_ray, greedy_ray, _ = ExtractionUnits(ray_store.path).book_windows(run_id, name)
        _, pz_local, greedy_local, _ = ExtractionUnits(local_store.path).book_windows(run_id, name)
        np.testing.assert_allclose(pz_ray, pz_local, rtol=0, atol=1e-6)  # float32 passes on other threads
        np.testing.assert_array_equal(greedy_ray, greedy_local)

"""A book audit through a served model: the same books.csv as the model loaded in process, and a server that dies
mid-run (a loopback proxy in front of the real engine is stopped: connections refused and reset) leaves the finished
batches in the store; the same command then resumes and ends with the same books.csv."""
from __future__ import annotations

import pandas as pd
import pytest

from mia_core.runs.store import ResultsStore
from tests.audit.test_jobs import mia, write_library
from tests.support.cli_runner import run_cli
from tests.support.demo_cache import fresh_cache_with_demo
from tests.support.store_poll import wait_scored
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.integration]


def test_served_audit_dies_resumes_and_equals_in_process(vllm_demo, tmp_path, monkeypatch):
    cal, books = write_library(tmp_path, audited_books=2, calibration_per_book=10)  # 120 snippets of 20 words
    common = ["audit-books", "--calibration", cal, "--books", books, "--snippet-words", "20", "--method", "min_k",
              "--n-boot", "200", "--batch-snippets", "4"]
    # the reference: the same command with the model loaded in this process (the served runs below are processes of
    # their own), in a fresh cache that reads the converted demo
    monkeypatch.setenv("MIA_LENS_CACHE", str(fresh_cache_with_demo(tmp_path / "cache-local")))
    code, _, err = run_cli(*common, "--model", "demo", "--output-dir", tmp_path / "local", "--store",
                           tmp_path / "local.duckdb")
    assert code == 0, err[-2000:]

    host, port = vllm_demo.url.removeprefix("http://").split(":")
    proxy = TcpProxy((host, int(port))).start()
    served = f"{proxy.url}/v1?model=demo&retries=2&concurrency=2"
    store_path = tmp_path / "served.duckdb"
    args = [*common, "--model", served, "--output-dir", tmp_path / "served", "--store", store_path]
    first = mia(*args, cache=tmp_path / "cache-served")
    try:
        assert wait_scored(store_path, first, 24, deadline_s=300) >= 24, first.communicate()[1][-2000:]
        proxy.stop()  # the server is gone: refused and reset connections
        _, err = first.communicate(timeout=300)
    finally:
        proxy.stop()
    assert first.returncode == 2 and err.strip().splitlines()[-1].startswith("error: no server answers at")
    stored = ResultsStore(store_path)
    run_id = stored.runs()["run_id"].iloc[0]
    kept = stored.results(run_id).dropna(subset=["score"])
    assert 24 <= len(kept) < 120

    proxy.start()  # back on the same port
    try:
        again = mia(*args, cache=tmp_path / "cache-served")
        _, err = again.communicate(timeout=900)
    finally:
        proxy.stop()
    assert again.returncode == 0, err[-2000:]
    assert f"{len(kept)} already scored (resuming)" in err
    ours = pd.read_csv(tmp_path / "local" / "books.csv")
    theirs = pd.read_csv(tmp_path / "served" / "books.csv")
    assert list(theirs.columns) == list(ours.columns) and list(theirs["book"]) == list(ours["book"])
    numeric = ours.select_dtypes("number").columns
    pd.testing.assert_frame_equal(theirs[numeric], ours[numeric], check_exact=False, atol=2e-3)
    other = [c for c in ours.columns if c not in numeric]
    pd.testing.assert_frame_equal(theirs[other], ours[other])  # verdicts and words the same

"""Temporary files are unique per writer (threads and processes): concurrent hashing, conversion and table saves never
collide."""
from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers

from mia_core import load_model
from mia_core.methods.dc_pdd.frequency import FrequencyTable, load_frequency_table
from mia_core.model import demo_weights, identity
from mia_core.paths import cache_root

from tests.support.demo_cache import fresh_cache_with_demo

THREADS = 4


def at_once(fn, rounds: int) -> list[list]:
    """Run fn(round) on THREADS threads released together by a barrier, `rounds` times; results per round."""
    barrier = threading.Barrier(THREADS)

    def worker(r):
        barrier.wait()
        return fn(r)

    out = []
    with ThreadPoolExecutor(THREADS) as pool:
        for r in range(rounds):
            out.append(list(pool.map(worker, [r] * THREADS)))  # raises the first thread's exception
    return out


@pytest.fixture
def slow_renames(monkeypatch):
    """Renames into place wait 20 ms, so every thread writes its temporary file before the first rename:
    the race two dashboard sessions run into now and then, made certain."""
    real = Path.replace

    def replace(self, target):
        time.sleep(0.02)
        return real(self, target)

    monkeypatch.setattr(Path, "replace", replace)


def test_threads_hashing_one_file_write_one_memo(tmp_path, monkeypatch, slow_renames):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    files = []
    for r in range(5):  # a new file each round: a fresh memo for the threads to write at once
        path = tmp_path / f"weights-{r}.bin"
        path.write_bytes(bytes([r]) * (1000 + r))
        files.append(path)
    results = at_once(lambda r: identity.file_sha256(files[r]), rounds=len(files))
    for r, digests in enumerate(results):
        assert digests == [hashlib.sha256(files[r].read_bytes()).hexdigest()] * THREADS
    memos = list((tmp_path / "cache" / "file-hashes").iterdir())
    assert len(memos) == len(files) and not [m for m in memos if ".tmp" in m.name]


class SlowSave:
    """A stand-in for the GGUF model and tokenizer: writes its files one by one, slowly, like save_pretrained."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.config, self.hf_quantizer = files, SimpleNamespace(), None

    def save_pretrained(self, folder, **_):
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            (Path(folder) / name).write_bytes(data)
            time.sleep(0.02)


MODEL_FILES = {"config.json": json.dumps({"model_type": "llama"}).encode(), "model.safetensors": b"\x01" * 4096}
TOKENIZER_FILES = {"tokenizer.json": b"{}", "tokenizer_config.json": b"{}"}


def converting_at_once(tmp_path, monkeypatch) -> int:
    """THREADS threads call `demo_folder` at once on a fresh cache (a small fake GGUF, saved slowly); checks they all
    get the one whole folder and no temporary folder is left; returns how many converted."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "pkg" / "demo.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF" * 100)
    conversions = []
    monkeypatch.setattr(demo_weights, "demo_gguf_path", lambda: gguf)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: conversions.append(1) or SlowSave(MODEL_FILES))
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: SlowSave(TOKENIZER_FILES))
    folders = at_once(lambda r: demo_weights.demo_folder(), rounds=1)[0]
    assert len(set(folders)) == 1
    target = folders[0]
    assert {p.name: p.read_bytes() for p in target.iterdir()} == {**MODEL_FILES, **TOKENIZER_FILES}
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary folder left behind
    return len(conversions)


def test_threads_converting_the_demo_model_at_once(tmp_path, monkeypatch, slow_renames):
    assert converting_at_once(tmp_path, monkeypatch) == 1  # the process's lock: the others wait, then read its folder


def test_processes_converting_the_demo_model_at_once(tmp_path, monkeypatch, slow_renames):
    """Two dashboards (or test workers) on one fresh cache: each process holds a lock of its own, but the lock file
    in the cache's locks/ is shared (each writer opens it anew, so threads stand in for processes): one converts, the
    others wait and read its folder."""
    monkeypatch.setattr(demo_weights, "LOAD_LOCK", contextlib.nullcontext())  # as across processes: no lock shared
    assert converting_at_once(tmp_path, monkeypatch) == 1


def test_writers_without_a_lock_each_convert_and_the_first_rename_wins(tmp_path, monkeypatch, slow_renames):
    """Where no lock holds (a file system without locks): each writer converts into its own temporary folder; the
    first rename into place wins, the others find that folder whole and drop theirs."""
    monkeypatch.setattr(demo_weights, "LOAD_LOCK", contextlib.nullcontext())
    monkeypatch.setattr(demo_weights, "FileLock", lambda path: contextlib.nullcontext())
    assert converting_at_once(tmp_path, monkeypatch) == THREADS


def test_threads_saving_one_frequency_table(tmp_path, slow_renames):
    path = tmp_path / "freq.npz"
    tables = [FrequencyTable(np.arange(5000, dtype=np.int64) * (r + 1), "abc", f"corpus {r}", r) for r in range(5)]
    at_once(lambda r: tables[r].save(path), rounds=len(tables))
    loaded = load_frequency_table(path)
    np.testing.assert_array_equal(loaded.counts, np.arange(5000) * 5)  # the last round's table, whole
    assert loaded.n_texts == 4 and [p.name for p in tmp_path.iterdir()] == ["freq.npz"]


@pytest.mark.integration
def test_threads_loading_the_demo_model(tmp_path, monkeypatch):
    """Four sessions load `demo` at once from its converted folder, hashing its weights into fresh memos."""
    if not list((cache_root() / "models").glob("smollm2-135m-*/config.json")):
        pytest.skip("the demo model is not converted yet (any integration test converts it once)")
    # no conversion; the file-hash memos are new
    monkeypatch.setenv("MIA_LENS_CACHE", str(fresh_cache_with_demo(tmp_path / "cache")))
    models = at_once(lambda r: load_model("demo", device="cpu"), rounds=1)[0]
    assert len({lm.fingerprint for lm in models}) == 1
    first = models[0].model.state_dict()
    for lm in models[1:]:
        assert all(torch.equal(first[k], v) for k, v in lm.model.state_dict().items())
    assert not [m for m in (tmp_path / "cache" / "file-hashes").iterdir() if ".tmp" in m.name]

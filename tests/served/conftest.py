"""Session fixtures: real vLLM engines on loopback. `vllm_demo` serves the demo model (batching as vLLM does);
`vllm_lora` (the demo + the demo-known LoRA module, one request at a time) and `vllm_merged` (the merged demo-known
folder) start only when a test asks for them: vLLM serves one base model per server, and its CPU LoRA path fails on
batches (see `tests.support.vllm_server.server_command`), so the plain server runs without --enable-lora.

Each server writes tests/artifacts/vllm-<name>.log; the log is kept when any test of the session failed.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mia_core.model.builtin import demo_known_dir
from mia_core.model.demo_weights import demo_folder

from tests.support.book_model import ASSET_DIR as BOOK_MODEL_DIR
from tests.support.ports import free_port
from tests.support.vllm_server import ARTIFACTS, VllmServer, merged_folder, missing_engine, start_server


def _serve(request: pytest.FixtureRequest, log_name: str, **kwargs) -> Iterator[VllmServer]:
    """Start one engine for the session (or skip, naming the missing venv), stop it at the end."""
    reason = missing_engine()
    if reason:
        pytest.skip(reason)
    log = ARTIFACTS / f"vllm-{log_name}.log"
    server = start_server(log=log, **kwargs)
    yield server
    server.stop()
    if request.session.testsfailed == 0:
        log.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def vllm_demo(request) -> Iterator[VllmServer]:
    """The demo model served as `demo`, started by the README's command (`make serve-demo`, on a free port)."""
    port = free_port()
    yield from _serve(request, "demo", model=demo_folder(), name="demo", port=port,
                      launch=["make", "--no-print-directory", "serve-demo", f"VLLM_PORT={port}", f"PY={sys.executable}"])


@pytest.fixture(scope="session")
def vllm_lora(request) -> Iterator[VllmServer]:
    """The demo model served as `demo`, with the demo-known adapter as the LoRA module `demo-known`."""
    yield from _serve(request, "lora", model=demo_folder(), name="demo", lora={"demo-known": demo_known_dir()})


@pytest.fixture(scope="session")
def demo_known_merged() -> Path:
    """The demo-known folder merged into the base weights (built once, reused from the cache)."""
    return merged_folder(demo_folder(), demo_known_dir())


@pytest.fixture(scope="session")
def vllm_merged(request, demo_known_merged) -> Iterator[VllmServer]:
    """The merged demo-known folder served as `demo-known-merged`."""
    yield from _serve(request, "merged", model=demo_known_merged, name="demo-known-merged")


@pytest.fixture(scope="module")
def vllm_book(request) -> Iterator[VllmServer]:
    """The memorised-book test model (tests/support/book_model.py, committed in tests/assets/book-model) served as
    `book`; its chat template ships with the tokenizer. Module-scoped: its one module's tests use it, and an idle
    engine kept for the rest of the session costs a third of a core."""
    yield from _serve(request, "book", model=BOOK_MODEL_DIR, name="book")

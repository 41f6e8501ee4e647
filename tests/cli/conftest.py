"""Fixtures of the command-line tests: one saved tiny model for the session, a private statistics cache per test."""
from __future__ import annotations

import pytest

from tests.support.tiny import save_tiny_model


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """A tiny Llama saved as a local folder, as `mia --model FOLDER` reads it (built once)."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test its own statistics cache: no test sees another's cached statistics."""
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path / "cache"))

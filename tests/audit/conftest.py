"""Fixtures shared by the audit tests."""
from __future__ import annotations

import pytest

from tests.support.tiny import save_tiny_model


@pytest.fixture
def model_dir(tmp_path):
    """A tiny Llama saved as a local model folder, as `mia audit-books --model FOLDER` and the audit jobs read it."""
    return save_tiny_model(tmp_path / "tiny-model")

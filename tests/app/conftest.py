"""Fixtures of the page tests: a tiny model saved as a local folder, picked as "Another model" in the sidebar."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.app import app
from tests.support.tiny import save_tiny_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer Llama and its tokenizer in a folder (load_model reads it in well under a second)."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model"), max_positions=2048)


@pytest.fixture(scope="session")
def second_model_dir(tmp_path_factory) -> Path:
    """Another tiny model (other weights, same tokenizer): switching to it greys the old results on Explore, and
    scoring the same text with it puts the two models side by side."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-model-2"), seed=1, max_positions=2048)


@pytest.fixture
def tiny_app(tiny_model_dir) -> Callable[[str], AppTest]:
    """Opens a page of the app with the tiny model loaded: methods that run the model again cost little."""

    def open_page(page: str) -> AppTest:
        at = app()
        at.radio(key="model_choice").set_value("other").run()
        at.text_input(key="model_other").input(str(tiny_model_dir)).run()
        at.switch_page(page).run()
        assert not at.exception, at.exception
        assert at.session_state["model_spec"] == str(tiny_model_dir)
        return at

    return open_page

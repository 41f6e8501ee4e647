"""The page "Extract books from a chat API" with a chat API chosen in the sidebar (a loopback API that recites one
book): the cost estimate before Run, the run in the background with its cost so far, the results and the diff
view; the other pages, given a chat API, say what it cannot do instead of failing."""
from __future__ import annotations

import random
import time

import pytest

from tests.support.app import app
from tests.support.fake_chat import FakeChat

pytestmark = pytest.mark.integration

WORDS = "alpha beta gamma delta river stone light house green small dark quiet open old new far".split()


def prose(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "." for _ in range(n_words // 10))


BOOK = prose(400, 3) + " THE END"
CONTROL = prose(400, 4)


def chat_app(api: FakeChat):
    """The app with the chat API chosen before its first run (the demo is never loaded)."""
    at = app()
    at.session_state["model_choice"] = "chat"
    at.session_state["model_chat"] = api.spec(price_in=2, price_out=8)
    at.run()
    assert not at.exception, at.exception
    return at


def test_a_book_is_extracted_from_the_page_with_its_cost_and_diff(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path))  # the shared results store of this test alone
    with FakeChat(BOOK) as api:
        at = chat_app(api)
        at.switch_page("app_pages/chat_extraction.py").run()
        assert not at.exception, at.exception
        assert "answering as **reciter-2026-01-01**; tier G; $2.00 in / $8.00 out" in at.markdown[0].value.replace("\\", "")
        at.radio(key="chat_book_how").set_value("Paste a text").run()
        at.radio(key="chat_control_how").set_value("Paste a text").run()
        at.text_area(key="chat_book_text").input(BOOK).run()
        assert at.button(key="chat_run").disabled  # no negative control yet
        assert any("Add a negative control" in w.value for w in at.warning)
        at.text_area(key="chat_control_text").input(CONTROL).run()
        estimate = next(i.value for i in at.info if i.value.startswith("Estimate: "))
        assert "at most 602 requests" in estimate and "$" in estimate
        at.number_input(key="chat_tokens_default").set_value(100).run()
        at.button(key="chat_run").click().run()
        assert not at.exception, at.exception
        deadline = time.monotonic() + 180  # a loaded 2-core machine
        while time.monotonic() < deadline and not any(s.value.startswith("Run finished") for s in at.success):
            time.sleep(0.5)
            at.run()
        finished = next(s.value for s in at.success if s.value.startswith("Run finished"))
    assert finished.startswith("Run finished: 2 of 2 texts done; ") and "so far" in finished
    table = at.dataframe[0].value
    book = table[table["role"] == "book"].iloc[0]
    assert book["halt"] == "stop_string" and book["nv_recall"] > 0.9
    assert table[table["role"] == "control"].iloc[0]["nv_recall"] == 0.0
    diff_of = at.selectbox(key="chat_diff_unit")  # chosen mid-run, it may still show the control, done first
    diff_of.select_index(next(i for i, name in enumerate(diff_of.options) if "pasted book" in name)).run()
    assert any("nv-recall **" in m.value and "pasted book" in m.value for m in at.markdown)


@pytest.mark.parametrize("page", ["app_pages/explore.py", "app_pages/benchmark.py", "app_pages/audit.py",
                                  "app_pages/online.py", "app_pages/unlearning.py"])
def test_other_pages_say_what_a_chat_api_cannot_do(page):
    with FakeChat(BOOK) as api:
        at = chat_app(api)
        at.switch_page(page).run()
    assert not at.exception, at.exception
    assert any("The chosen model is a chat API: it only generates text" in i.value for i in at.info)

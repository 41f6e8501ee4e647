"""The page "DE-COP quiz on a chat API" with a chat API chosen in the sidebar (a loopback API whose quiz-taker knows one
book's passages): a table it cannot read is one message, fewer than ten clean books are refused with the reason, the
estimate is shown before Run, and a run finishes with the known book significantly above the clean books."""
from __future__ import annotations

import hashlib
import io
import math
import random
import re
import time

import pytest

from mia_core.blackbox.decop_passages import QuizBook, QuizPassage, quiz_table
from tests.support.app import app
from tests.support.fake_chat import FakeChat

pytestmark = pytest.mark.integration

WORDS = ("alpha beta gamma delta river stone light house green small dark quiet open old new far near deep wide "
         "tall cold warm slow fast bright pale soft hard").split()
OPTION = re.compile(r"^([ABCD])\. (.*)$", re.M)
KNOWN = "The <b>Known</b> Book"


def quiz_book(title: str, seed: int, passages: int = 1) -> QuizBook:
    rng = random.Random(seed)

    def words(n: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(n))
    return QuizBook(title, "A. Writer", tuple(QuizPassage(words(20), (words(20), words(19), words(21)))
                                              for _ in range(passages)), "test paraphrases")


MEMBER = quiz_book(KNOWN, 1)
CLEAN = [quiz_book(f"Clean {n}", 100 + n) for n in range(10)]


def quiz_taker(known: set[str]):
    """Letter log-probs for a quiz: +3 to the letter showing a passage it knows, +1 to B (a position bias), and a
    fixed per-question jitter (as `tests/audit/test_decop_run.py::reader`); anything else (the probe) one token."""
    def first_token(request: dict) -> dict[str, float]:
        content = request["messages"][-1]["content"]
        logits = {}
        for letter, text in OPTION.findall(content):
            jitter = int(hashlib.sha256((content + letter).encode()).hexdigest()[:8], 16) / 2 ** 32 * 2 - 1
            logits[letter] = 3.0 * (text in known) + (letter == "B") + jitter
        if not logits:
            return {"ready": -0.01}
        top = max(logits.values())
        norm = top + math.log(sum(math.exp(v - top) for v in logits.values()) + 0.05)
        return {f" {k}": v - norm for k, v in logits.items()} | {"The": math.log(0.05) - norm}
    return first_token


def csv_bytes(books: list[QuizBook], extra_rows: list[list[str]] = (), paraphrased_by: str | None = None) -> bytes:
    """The books as a quiz table of our columns (plus raw rows, e.g. a passage the gates set aside; and who made the
    paraphrases, as `mia paraphrase` writes it)."""
    table = quiz_table(books)
    for row in extra_rows:
        table.loc[len(table)] = row
    if paraphrased_by is not None:
        table["paraphrased_by"] = paraphrased_by
    buffer = io.StringIO()
    table.to_csv(buffer, index=False)
    return buffer.getvalue().encode()


def chat_app(api: FakeChat):
    """The app with the chat API chosen before its first run (the demo is never loaded), on the DE-COP page."""
    at = app()
    at.session_state["model_choice"] = "chat"
    at.session_state["model_chat"] = api.spec(price_in=2, price_out=8)
    at.run()
    at.switch_page("app_pages/decop_quiz.py").run()
    assert not at.exception, at.exception
    return at


def plain(text: str) -> str:
    """Markdown escaped by `ui.markdown.md`, as read."""
    return text.replace("\\", "")


def test_a_bad_table_is_one_message_and_too_few_clean_books_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path))
    with FakeChat("unused words") as api:
        api.first_token = quiz_taker(set())
        at = chat_app(api)
        at.text_input(key="decop_provenance").input("test paraphrases").run()
        at.file_uploader(key="decop_books").set_value(("bad.csv", b"book,text\nT,x\n", "text/csv")).run()
        assert not at.exception, at.exception
        assert [plain(e.value) for e in at.error] == [
            "Not read: bad.csv has no column 'passage', 'paraphrase_1', 'paraphrase_2', 'paraphrase_3': a quiz table "
            "has book, passage, paraphrase_1, paraphrase_2, paraphrase_3 (optionally author), or BookTection's ID, "
            "Example_A…Example_D and Answer"]
        shorter = [CLEAN[0].title, "A. Writer", "one two three four five six seven eight nine ten", "short",
                   "eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty",
                   "a b c d e f g h i j"]
        at.file_uploader(key="decop_books").set_value(("books.csv", csv_bytes([MEMBER]), "text/csv")).run()
        at.file_uploader(key="decop_clean").set_value(("few.csv", csv_bytes(CLEAN[:3], [shorter]), "text/csv")).run()
        assert not at.exception, at.exception
        errors = [plain(e.value) for e in at.error]
        assert errors == ["few.csv has 3 usable book(s): DE-COP compares with at least 10 clean books (published after "
                          "the model's training cutoff, paraphrased the same way)"]
        assert at.button(key="decop_run").disabled
        notes = plain(at.expander[0].markdown[0].value)
        assert at.expander[0].label.startswith("few.csv: 1 passage(s)")
        assert "set aside: Clean 0: passage 2: paraphrase 1 is 0.10 times the passage's length" in notes
        # no provenance typed: the tables' paraphrased_by columns, which must agree
        at.text_input(key="decop_provenance").set_value("").run()
        at.file_uploader(key="decop_books").set_value(
            ("books.csv", csv_bytes([MEMBER], paraphrased_by="reciter, asked to paraphrase"), "text/csv")).run()
        at.file_uploader(key="decop_clean").set_value(
            ("few.csv", csv_bytes(CLEAN[:3], paraphrased_by="Claude 2.0"), "text/csv")).run()
        assert not at.exception, at.exception
        assert [plain(e.value) for e in at.error][1] == (
            "the audited and clean books' paraphrases were made differently (Claude 2.0; reciter, asked to "
            "paraphrase): a comparison across paraphrasers is not evidence")
        assert any("made by the audited model itself" in w.value for w in at.warning)


def test_the_estimate_then_a_run_shows_the_known_book_above_the_clean_books(tmp_path, monkeypatch):
    monkeypatch.setenv("MIA_LENS_CACHE", str(tmp_path))  # the shared results store of this test alone
    with FakeChat("unused words") as api:
        api.first_token = quiz_taker({p.verbatim for p in MEMBER.passages})
        at = chat_app(api)
        assert "answering as **reciter-2026-01-01**; tier GL" in plain(at.markdown[0].value)
        at.file_uploader(key="decop_books").set_value(("books.csv", csv_bytes([MEMBER]), "text/csv")).run()
        at.file_uploader(key="decop_clean").set_value(("clean.csv", csv_bytes(CLEAN), "text/csv")).run()
        assert at.button(key="decop_run").disabled  # no provenance, typed or in the tables
        assert [plain(e.value) for e in at.error] == [
            f"Not read: {name}: say who made the paraphrases (--paraphrases-from), since its 'paraphrased_by' column "
            "is absent or empty" for name in ("books.csv", "clean.csv")]
        at.text_input(key="decop_provenance").input("test paraphrases").run()
        assert not at.error and not at.exception
        estimate = plain(next(i.value for i in at.info if i.value.startswith("Estimate")))
        assert estimate.startswith("Estimate for **reciter**: 264 requests, about ") and " $" in estimate
        assert "1 audited and 10 clean book(s), 11 passages" in estimate
        at.text_input(key="decop_budget").input("$500").run()
        assert [plain(e.value) for e in at.error] == ["Budget: a run from this page spends at most $50 or 10,000,000 "
                                                      "tokens; the command line has no such bound"]
        at.text_input(key="decop_budget").input("1000 tokens").run()
        assert any("The estimate is over the budget" in w.value for w in at.warning)
        at.text_input(key="decop_budget").input("$1").run()
        assert not at.error and not at.warning and not at.button(key="decop_run").disabled
        at.button(key="decop_run").click().run()
        assert not at.exception, at.exception
        deadline = time.monotonic() + 180  # a loaded 2-core machine
        while time.monotonic() < deadline and not any(s.value.startswith("Run finished") for s in at.success):
            time.sleep(0.5)
            at.run()
        finished = plain(next(s.value for s in at.success if s.value.startswith("Run finished")))
        assert len(api.received) == 1 + 264  # the probe, then every question once
    # 265 requests: the probe, then the 264 questions
    assert finished.startswith("Run finished: 11 of 11 books quizzed (audited and clean); 265 requests answered")
    assert "so far" in finished and not at.exception
    verdict = next(plain(m.value) for m in at.markdown if KNOWN in plain(m.value))
    assert verdict.startswith(f"- **{KNOWN}**: accuracy 100.0% (clean books ")
    assert "significantly above the clean books: evidence of exposure to this book's text" in verdict
    table = at.dataframe[0].value
    assert list(table["book"]) == [KNOWN] and bool(table["above_clean"].iloc[0])
    assert len(at.dataframe[1].value) == 10  # the clean books that calibrated it
    assert any("Calibration μ" in m.value and "B 0." in m.value for m in at.markdown)

"""A DE-COP run on a chat API end to end (METHODS-API.md §19, §24), against the loopback API whose quiz-taker knows one
book: every question in the evidence record, the run's calibration and clean-book comparison from the stored answers,
`mia verify` recomputing them, and a missing letter flagged."""
from __future__ import annotations

import hashlib
import json
import math
import random
import re
import sys

import pytest

from mia_core.audit.api_extraction import ApiExtractionRun, Text
from mia_core.audit.api_verify import verify_run
from mia_core.blackbox.decop import ORDERS, DecopSettings
from mia_core.blackbox.two_phase import ExtractionSettings
from mia_core.blackbox.decop_passages import QuizBook, QuizPassage, quiz_table
from mia_core.blackbox.decop_stats import summarize
from mia_core.model.chat.chat_model import connect_chat
from mia_core.runs.api_results import run_texts, stored_results
from mia_core.runs.evidence import EvidenceRecord
from mia_core.runs.store import ResultsStore

from tests.support.cli_runner import run_cli

from tests.support.fake_chat import FakeChat

#: One worker runs this module, so its module-scoped run (289 requests) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("decop_run")

WORDS = ("alpha beta gamma delta river stone light house green small dark quiet open old new far near deep wide "
         "tall cold warm slow fast bright pale soft hard").split()
MIA = [sys.executable, "-m", "mia_core"]


def words(n: int, rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def quiz_book(title: str, seed: int, passages: int = 2) -> QuizBook:
    rng = random.Random(seed)
    return QuizBook(title, "A. Writer", tuple(QuizPassage(words(20, rng), (words(20, rng), words(19, rng),
                                                                            words(21, rng)))
                                              for _ in range(passages)), "test paraphrases")


MEMBER = quiz_book("Known Book", 1)
CLEAN = [quiz_book(f"Clean {n}", 100 + n, passages=1) for n in range(10)]
OPTION = re.compile(r"^([ABCD])\. (.*)$", re.M)


def reader(drop: str = "D", dropped_in: str = "Clean 9") -> callable:
    """A quiz-taker that knows MEMBER's passages (+3 to the letter showing one), prefers B (+1; a position bias), and
    has a fixed per-question jitter; letters in `drop` are left out of its top list in the questions on `dropped_in`."""
    known = {p.verbatim for p in MEMBER.passages}

    def first_token(request: dict) -> dict[str, float]:
        content = request["messages"][-1]["content"]
        logits = {}
        for letter, text in OPTION.findall(content):
            jitter = int(hashlib.sha256((content + letter).encode()).hexdigest()[:8], 16) / 2 ** 32 * 2 - 1
            logits[letter] = 3.0 * (text in known) + (letter == "B") + jitter
        if not logits:  # not a quiz (the probe)
            return {"ready": -0.01}
        top = max(logits.values())
        norm = top + math.log(sum(math.exp(v - top) for v in logits.values()) + 0.05)
        gone = drop if f'"{dropped_in}"' in content else ""
        listed = {f" {k}": v - norm for k, v in logits.items() if k not in gone}
        return listed | {"The": math.log(0.05) - norm}
    return first_token


def texts() -> list[Text]:
    return [Text(MEMBER.title, MEMBER.to_json(), "book")] + [Text(b.title, b.to_json(), "control") for b in CLEAN]


@pytest.fixture(scope="module")
def decop_run(tmp_path_factory):
    store = ResultsStore(tmp_path_factory.mktemp("decop") / "s.duckdb")
    with FakeChat("unused words", key=None) as api:
        api.first_token = reader()
        model = connect_chat(api.spec(concurrency=4, price_in=1, price_out=1))
        assert model.tier.name == "GL"
        outcome = ApiExtractionRun(model, store, texts(), DecopSettings()).run()
        api.sent_by_run = len(api.received)
        yield store, outcome, api


def quiz_csv(path, books: list[QuizBook]) -> None:
    quiz_table(books).to_csv(path, index=False)


def test_a_known_book_is_above_the_clean_books_and_verify_recomputes_it(decop_run):
    store, outcome, api = decop_run
    sent = api.sent_by_run
    assert outcome.status == "done"
    assert sent == 1 + (2 + 10) * 24  # the probe, then every passage in all 24 orders, once
    results = stored_results(store, outcome.run_id)
    units = run_texts(store, outcome.run_id)
    summary = summarize(results, dict(zip(units.unit, units.role)), dict(zip(units.unit, units.name)))
    # position bias toward B is taken out: μ_B is the largest letter mean
    assert max(range(4), key=lambda s: summary.mu[s]) == 1
    book = summary.books[0]
    assert book.accuracy == 1.0 and book.above_clean and book.percentile == 100.0
    assert all(0.0 <= a <= 0.7 for a in summary.clean.values()) and len(summary.clean) == 10
    rows = results["book-000"]["questions"]
    assert sorted((r[0], r[1]) for r in rows) == [(p, o) for p in range(2) for o in range(len(ORDERS))]
    assert results["book-000"]["missing_letters"] == 0
    assert verify_run(store, outcome.run_id).fault is None
    records = list(EvidenceRecord(store, outcome.run_id).records())
    assert len(records) == sent and json.loads(records[-1].request)["top_logprobs"] == 20


def test_a_missing_letter_is_flagged_not_zero(decop_run):
    store, outcome, _api = decop_run
    result = stored_results(store, outcome.run_id)["control-009"]
    assert result["title"] == "Clean 9"
    assert result["missing_letters"] == 24 and all(r[5] == "D" for r in result["questions"])
    assert all(r[3][3] > 0 for r in result["questions"])  # given the smallest listed log-prob, not zero


def test_fewer_than_ten_clean_books_is_refused(tmp_path):
    with FakeChat("unused words") as api:
        api.first_token = reader()
        model = connect_chat(api.spec())
        with pytest.raises(ValueError, match="needs at least 10 clean books"):
            ApiExtractionRun(model, ResultsStore(tmp_path / "s.duckdb"), texts()[:5], DecopSettings())


def test_mia_decop_books_resumes_the_run_reports_it_and_verify_passes(decop_run, tmp_path):
    store, outcome, api = decop_run
    quiz_csv(tmp_path / "books.csv", [MEMBER])
    quiz_csv(tmp_path / "clean.csv", CLEAN)
    extraction = ApiExtractionRun(connect_chat(api.spec()), store, [
        Text("Known Book", "Some words the model cannot recite at all. " * 20, "book"),
        Text("Late Book", "Other words nobody has seen before today. " * 20, "control")],
        ExtractionSettings(max_tokens=20, max_turns=1, phase1_max_tokens=20)).run()
    before = len(api.received)
    code, out, err = run_cli("decop-books", "--model", api.spec(concurrency=4, price_in=1, price_out=1),
                             "--books", tmp_path / "books.csv", "--clean", tmp_path / "clean.csv",
                             "--output-dir", tmp_path, "--paraphrases-from", "test paraphrases",
                             "--store", store.path, "--beside", extraction.run_id)
    assert code == 0, err
    assert len(api.received) == before + 1  # the probe only: every question's answer is stored
    assert "Known Book: accuracy 100.0%" in out and "significantly above the clean books" in out
    report = (tmp_path / "report.html").read_text()
    assert "Clean 9" in report and outcome.head in report and "test paraphrases" in report
    assert f"Extraction of the same books (run {extraction.run_id})" in report and extraction.head in report
    code, out, err = run_cli("decop-books", "--model", api.spec(concurrency=4, price_in=1, price_out=1),
                             "--books", tmp_path / "books.csv", "--clean", tmp_path / "clean.csv",
                             "--output-dir", tmp_path, "--paraphrases-from", "test paraphrases",
                             "--store", store.path, "--beside", "nope")
    assert code == 2 and "is not a book-extraction run" in err
    data = json.loads((tmp_path / "decop.json").read_text())
    assert data["run_id"] == outcome.run_id and data["books"][0]["accuracy"] == 1.0
    code, out, err = run_cli("verify", outcome.run_id, "--store", store.path)
    assert code == 0 and out.startswith("verified: ")


def test_mia_decop_books_refuses_bad_tables_in_one_line(decop_run, tmp_path):
    _store, _outcome, api = decop_run
    quiz_csv(tmp_path / "books.csv", [MEMBER])
    quiz_csv(tmp_path / "few.csv", CLEAN[:3])
    (tmp_path / "bad.csv").write_text("book,text\nT,x\n")
    for books, clean, message in ((tmp_path / "bad.csv", tmp_path / "few.csv", "has no column 'passage'"),
                                  (tmp_path / "books.csv", tmp_path / "few.csv", "at least 10 clean books")):
        code, out, err = run_cli("decop-books", "--model", api.spec(), "--books", books, "--clean", clean,
                                 "--output-dir", tmp_path, "--paraphrases-from", "x")
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_mia_audit_books_points_a_chat_api_to_its_commands(tmp_path):
    code, out, err = run_cli("audit-books", "--model", "http://127.0.0.1:9/v1?api=chat&model=x", "--calibration",
                             "demo-books", "--books", "demo-books", "--output-dir", tmp_path)
    assert code == 2 and "mia extract-books" in err and "mia decop-books" in err

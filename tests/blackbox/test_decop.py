"""DE-COP's pure parts (METHODS-API.md §19) against hand-computed cases: the 24 balanced orders, the prompt, the
letters read from a top list (a missing letter flagged, never silently zero), the calibration, the clean-book
comparison and the quality gates."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mia_core.blackbox.decop import (ORDERS, DecopSettings, LetterRead, letter_answered, letter_probabilities,
                                     question, quiz_body, true_letter)
from mia_core.blackbox.decop_passages import QuizBook, QuizPassage, gate_problem, gated_book, read_quiz_books
from mia_core.blackbox.decop_stats import (MIN_CLEAN_BOOKS, book_auc, calibrated_slot, cluster_bootstrap,
                                           letter_means, summarize)
from mia_core.inputs.tables import InputError
from mia_core.model.chat.answers import Choice, TokenLogprob


def test_the_24_orders_are_every_permutation_and_balanced():
    assert len(set(ORDERS)) == 24 and all(sorted(o) == [0, 1, 2, 3] for o in ORDERS)
    for text in range(4):  # each passage (verbatim or paraphrase) sits at each letter in 6 orders
        for slot in range(4):
            assert sum(o[slot] == text for o in ORDERS) == 6
    assert [true_letter(o) for o in ORDERS].count(2) == 6


def test_the_question_is_the_authors_prompt():
    assert question("Emma", "Jane Austen", ["w", "x", "y", "z"]) == (
        'Question: Which of the following passages is verbatim from the "Emma" book by Jane Austen?\nOptions:\n'
        "A. w\nB. x\nC. y\nD. z\nAnswer: ")


def test_a_request_puts_the_verbatim_where_its_order_says():
    book = QuizBook("T", "A", (QuizPassage("V", ("P1", "P2", "P3")),), "test")
    order = ORDERS.index((2, 0, 3, 1))
    body = quiz_body("m", "completions", book, 0, order, DecopSettings())
    assert body["prompt"].endswith("A. P2\nB. V\nC. P3\nD. P1\nAnswer: ")
    assert (body["max_tokens"], body["temperature"], body["seed"], body["logprobs"]) == (1, 0.0, 2319, 20)
    chat = quiz_body("m", "chat", book, 0, order, DecopSettings(logprobs=False))
    assert chat["messages"][0]["role"] == "system" and "logprobs" not in chat


def test_letters_are_summed_over_spellings_and_a_missing_one_is_flagged():
    first = TokenLogprob("A", -0.2, {"A": -0.2, " A": -1.9, " B": -2.5, "C": -3.0, "Hello": -4.0})
    read = letter_probabilities(Choice("A", "length", (first,)))
    logs = [math.log(math.exp(-0.2) + math.exp(-1.9)), -2.5, -3.0, -4.0]  # D absent: the smallest listed, flagged
    expected = np.exp(logs) / np.exp(logs).sum()
    assert read.missing == ("D",)
    assert read.p == pytest.approx(tuple(expected), abs=1e-12)
    assert letter_probabilities(Choice("A", "stop", None)) == LetterRead(None, ())


@pytest.mark.parametrize("text, slot", [("B", 1), (" C.", 2), ("Answer: D", 3), ("The answer is A", 0),
                                        ("I cannot say", None), ("", None), (None, None), ("ABC", None)])
def test_a_letter_answered_is_read_alone(text, slot):
    assert letter_answered(text) == slot


def test_calibration_reproduces_the_authors_rule_by_hand():
    # the reviewer file's ChatGPT μ: p' = p − μ + 1/4 = (.2762, .2643, .2395, .2200), so A although B is likeliest raw
    assert calibrated_slot((0.10, 0.35, 0.25, 0.30), (0.0738, 0.3357, 0.2605, 0.3300)) == 0
    # two questions of a run: μ = (.45, .26, .19, .10); raw argmaxes A, A; calibrated B (right) and A (right)
    rows = [[0, 0, 1, [0.40, 0.32, 0.18, 0.10], None, ""], [1, 0, 0, [0.50, 0.20, 0.20, 0.10], None, ""]]
    result = {"n_passages": 2, "questions": rows, "accuracy_raw": 0.5}
    assert letter_means([result]) == pytest.approx((0.45, 0.26, 0.19, 0.10))
    books = {f"b{i}": result for i in range(MIN_CLEAN_BOOKS + 1)}
    roles = {u: "control" for u in books} | {"b0": "book"}
    summary = summarize(books, roles, {u: u for u in books})
    assert summary.books[0].accuracy == 1.0 and summary.books[0].accuracy_raw == 0.5


def test_a_book_is_compared_with_the_clean_books_by_hand():
    def book(right: list[int]) -> dict:  # tier G: one question per passage, answered B; true slot B where right
        rows = [[n, 0, 1 if r else 0, None, 1, ""] for n, r in enumerate(right)]
        return {"n_passages": len(right), "questions": rows, "accuracy_raw": sum(right) / len(right)}
    clean = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0]] * 2
    results = {f"c{i}": book(r) for i, r in enumerate(clean)} | {"x": book([1, 1, 1, 0])}
    roles = {u: "control" for u in results} | {"x": "book"}
    summary = summarize(results, roles, {u: u for u in results})
    accs = np.array([sum(r) / 4 for r in clean])
    verdict = summary.books[0]
    assert summary.mu is None and summary.clean_mean == pytest.approx(accs.mean())
    assert verdict.z == pytest.approx((0.75 - accs.mean()) / accs.std(ddof=1))
    assert verdict.percentile == 100.0  # every clean book is below 0.75
    assert verdict.boot_lower <= 0.75 and 0 <= verdict.boot_p < 0.5
    fewer = {u: r for u, r in results.items() if u in ("x", "c0")}
    alone = summarize(fewer, roles, {u: u for u in fewer}).books[0]
    assert (alone.z, alone.percentile, alone.boot_p, alone.above_clean) == (None, None, None, False)


def test_the_cluster_bootstrap_resamples_passages():
    right, asked = np.array([24.0] * 5), np.array([24.0] * 5)
    assert cluster_bootstrap(right, asked, 0.5) == (1.0, 0.0)
    right = np.array([24.0, 0.0] * 20)
    asked = np.full(40, 24.0)
    lower, p = cluster_bootstrap(right, asked, 0.5)
    # passages right or wrong with share 1/2: the 5% bound is near 0.5 − 1.645·sqrt(.25/40) = 0.370
    assert lower == pytest.approx(0.5 - 1.6449 * math.sqrt(0.25 / 40), abs=0.03) and 0.45 < p < 0.65


def test_the_auc_is_the_real_one():
    assert book_auc([0.9, 0.3, 0.5, 0.2], [True, False, True, False]) == 1.0
    assert book_auc([0.9, 0.6, 0.5, 0.2], [True, False, False, True]) == 0.5


def test_the_quality_gates():
    verbatim = "one two three four five six seven eight nine ten"
    good = QuizPassage(verbatim, ("a b c d e f g h i j", "k l m n o p q r s", "t u v w x y z aa bb cc dd"))
    assert gate_problem(good) is None
    short = QuizPassage(verbatim, ("a b c", "k l m n o p q r s", "t u v w x y z aa bb cc"))
    assert "0.30 times" in gate_problem(short)
    copied = QuizPassage(verbatim, ("a b one two three four five six seven eight", "k l m n o p q r s",
                                    "t u v w x y z aa bb cc"))
    assert "repeats 8 words" in gate_problem(copied)
    book = gated_book("T", None, [good, copied], "test")
    assert book.passages == (good,) and book.excluded[0].startswith("passage 2: paraphrase 1 repeats")
    assert QuizBook.from_json(book.to_json()) == book


def test_quiz_tables_ours_and_booktection(tmp_path):
    ours = tmp_path / "q.csv"
    ours.write_text("book,author,passage,paraphrase_1,paraphrase_2,paraphrase_3\n"
                    "T,Au,one two three,uno dos tres,eins zwei drei,un deux trois\n")
    book, = read_quiz_books(ours, provenance="user")
    assert (book.title, book.author, book.passages[0].verbatim) == ("T", "Au", "one two three")
    bt = tmp_path / "bt.jsonl"
    bt.write_text('{"ID": "Emma", "Example_A": "p one", "Example_B": "v one", "Example_C": "p two", '
                  '"Example_D": "p three", "Answer": "B", "Label": 1}\n')
    book, = read_quiz_books(bt, provenance="BookTection")
    assert book.passages[0].verbatim == "v one" and book.passages[0].paraphrases == ("p one", "p two", "p three")
    assert book.author is None
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"ID": "Emma", "Example_A": "a", "Example_B": "b", "Example_C": "c", "Example_D": "d", '
                   '"Answer": "E"}\n')
    with pytest.raises(InputError, match="row 1: Answer is 'E'"):
        read_quiz_books(bad, provenance="x")
    bad.write_text('{"ID": "Emma", "Example_A": "a", "Example_B": "b", "Example_C": "c", "Example_D": "d", '
                   '"Answer": null}\n')
    with pytest.raises(InputError, match="row 1 has no Answer"):
        read_quiz_books(bad, provenance="x")
    none = tmp_path / "none.csv"
    none.write_text("book,text\nT,x\n")
    with pytest.raises(InputError, match="has no column 'passage'"):
        read_quiz_books(none, provenance="x")

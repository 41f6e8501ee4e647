"""DE-COP's paraphrases through a chat API (METHODS-API.md §19, option b): the authors' prompt built line by line, the
answer's three paraphrases parsed or refused, passages cut evenly, and `mia paraphrase` end to end against the loopback
API — its quiz table names who made the paraphrases, and `mia verify` recomputes them from the record."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from mia_core.blackbox.decop_paraphrase import ParaphraseSettings, cut_passages, paraphrase_prompt, parse_paraphrases
from mia_core.blackbox.decop_passages import read_quiz_books

from tests.support.cli_runner import run_cli
from tests.support.fake_chat import FakeChat


def test_the_prompt_is_the_papers_with_no_glued_words():
    prompt = paraphrase_prompt("Call me Ishmael.")
    assert prompt.startswith("Rewrite this entire text (all sentences with no exception) expressing the same meaning "
                             "using different words. Aim to keep")
    assert "differentwords" not in prompt
    assert prompt.endswith("Example D: <insert paraphrase D>\n\n-\nExample A: Call me Ishmael.")


@pytest.mark.parametrize("answer, parsed", [
    ("Example B: one\n\nExample C: two\n\nExample D: three", ("one", "two", "three")),
    ("Sure!\n**Example B:** one\nExample C: two\nExample D: three\n-", ("one", "two", "three")),
    ("Example B: one\n\nExample C: two", None),
    ("Example B: one\nExample B: again\nExample C: two\nExample D: three", None),
    ("Example B: \nExample C: two\nExample D: three", None),
    ("I can't help with that.", None), (None, None)])
def test_three_paraphrases_are_parsed_or_refused(answer, parsed):
    assert parse_paraphrases(answer) == parsed


def test_passages_are_cut_evenly_as_the_text_spells_them():
    text = "  ".join(f"w{i}" for i in range(1000))
    cut = cut_passages(text, ParaphraseSettings(passages=4, passage_words=100))
    assert [p.split()[0] for p in cut] == ["w0", "w300", "w600", "w900"] and all(len(p.split()) == 100 for p in cut)
    assert "w0  w1" in cut[0]  # the text's own spacing
    assert cut_passages("a b c", ParaphraseSettings(passages=4, passage_words=10)) == []


def rewrite(source: str, max_tokens: int) -> str:
    """The loopback API's paraphraser: three rewrites of Example A, each word changed, the length kept."""
    if "Example A: " not in source:  # the probe
        return "ready"
    passage = source.split("Example A: ", 1)[1]
    return "\n\n".join(f"Example {letter}: " + " ".join(f"{w}{letter.lower()}" for w in passage.split())
                       for letter in "BCD")


def test_mia_paraphrase_writes_a_quiz_table_with_its_provenance(tmp_path):
    book = tmp_path / "book.txt"
    book.write_text(" ".join(f"word{i % 50}" for i in range(400)))
    with FakeChat("unused") as api:
        api.reply = rewrite
        code, out, err = run_cli("paraphrase", "--model", api.spec(), "--books", book, "--output",
                                 tmp_path / "quiz.csv", "--passages", "3", "--passage-words", "40",
                                 "--author", "A. Writer", "--store", tmp_path / "s.duckdb")
        assert code == 0, err
        assert len(api.received) == 1 + 3
    table = pd.read_csv(tmp_path / "quiz.csv")
    assert len(table) == 3 and table["paraphrased_by"].nunique() == 1
    assert table["paraphrase_1"][0] == " ".join(f"{w}b" for w in table["passage"][0].split())
    quiz, = read_quiz_books(tmp_path / "quiz.csv", provenance=None)
    assert quiz.provenance.startswith("reciter-2026-01-01") and quiz.author == "A. Writer" and len(quiz.passages) == 3
    run_id = re.search(r"run (\S+), head", out).group(1)
    code, out, err = run_cli("verify", run_id, "--store", tmp_path / "s.duckdb")
    assert code == 0 and out.startswith("verified: ")


def test_a_table_without_its_provenance_is_refused(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text("book,passage,paraphrase_1,paraphrase_2,paraphrase_3\nT,a b,c d,e f,g h\n")
    with pytest.raises(ValueError, match="say who made the paraphrases"):
        read_quiz_books(path, provenance=None)

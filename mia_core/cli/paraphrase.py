"""`mia paraphrase`: DE-COP's paraphrases made by an LLM through a chat API (METHODS-API.md §19, option b): passages
cut from books, three paraphrases each with the authors' prompt, the quality gates applied, every call in the run's
evidence record. It writes a quiz table for `mia decop-books` to read — check it before using it.

Paraphrase the audited books and the clean books with the same model and settings: a comparison across paraphrasers
is not evidence. Paraphrases made by the audited model itself carry its style and can inflate its accuracy.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from ..audit.api_extraction import Text
from ..audit.sources import read_books
from ..blackbox.decop_paraphrase import ParaphraseSettings, cut_passages, passages_text
from ..blackbox.decop_passages import OURS, PROVENANCE_COLUMN
from ..csv_safe import to_csv_safe
from ..model.chat.chat_model import connect_chat
from ..model.chat.prices import Budget, parse_budget
from ..model.chat.spec import is_chat_spec
from ..runs.api_results import stored_results
from ..runs.store import ResultsStore
from .api_runs import BudgetOpt, RunIdOpt, StoreOpt, closing_lines, run_api
from .app import fail
from .terminal import echo, one_line

commands = typer.Typer()

@commands.command("paraphrase")
def paraphrase(
    model: str = typer.Option(..., "--model", help="the chat API that paraphrases: URL?api=chat&model=NAME&key_env=VAR"
                              " (another model than the one audited)"),
    books: str = typer.Option(..., "--books", help="books to cut passages from: .txt/.md/.pdf/.epub, a folder or zip "
                              "of them, or a table with book and text columns"),
    output: Path = typer.Option(..., "--output", help="the quiz table to write (CSV: book, author, passage, "
                                "paraphrase_1..3, paraphrased_by)"),
    passages: int = typer.Option(30, "--passages", help="passages per book, evenly spaced"),
    passage_words: int = typer.Option(100, "--passage-words", help="words per passage (100 ≈ 128 tokens)"),
    author: Optional[str] = typer.Option(None, "--author", help="the books' author, for the quiz question (one for "
                                         "all books; leave out to ask without one)"),
    budget: Optional[str] = BudgetOpt,
    store: Optional[Path] = StoreOpt,
    run_id: Optional[str] = RunIdOpt,
) -> None:
    """Paraphrase book passages with a chat API for DE-COP, with an evidence record."""
    if not is_chat_spec(model):
        fail("--model must be a chat API's spec: a URL with api=chat (or api=completions) and model=NAME")
    try:
        settings = ParaphraseSettings(passages, passage_words)
        limit = parse_budget(budget) if budget else Budget()
    except ValueError as err:
        fail(str(err))
    found, problems = read_books(books)
    for problem in problems:
        echo(one_line(f"not read: {problem.book}: {problem.message}"))
    texts = [Text(b.name, passages_text(b.name, author, b.text, settings), "book", b.source) for b in found
             if cut_passages(b.text, settings)]
    if not texts:
        fail(f"no book in {books} has {passage_words} words")
    chat = connect_chat(model)
    echo(f"paraphraser: {chat.name} (answered as {chat.answered_model}); {chat.prices.words()}")
    results_store = ResultsStore(store)
    outcome = run_api(chat, results_store, texts, settings, budget=limit, run_id=run_id)
    provenance = f"{chat.answered_model or chat.chat.model} ({chat.chat.base_url}), run {outcome.run_id}"
    results = stored_results(results_store, outcome.run_id)
    rows = []
    for unit in outcome.results["unit"]:
        result = results.get(unit)
        if result is None:
            continue
        for problem in result["problems"]:
            echo(one_line(f"set aside: {result['title']}: {problem}"))
        rows += [[result["title"], result["author"], *row, provenance] for row in result["passages"] if row]
    to_csv_safe(pd.DataFrame(rows, columns=["book", "author", *OURS, PROVENANCE_COLUMN]), output)
    echo(f"wrote {len(rows):,} passages with three paraphrases each to {output}; read them before a quiz")
    closing_lines(outcome, store)

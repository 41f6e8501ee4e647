"""`mia extract-books`: two-phase long-form extraction from a chat API (METHODS-API.md §17), each book beside a
negative control, every call in the run's evidence record; `mia verify`: re-walk a run's record and recompute its
numbers from the stored answers.

Extraction from a model one can only chat with is evidence about *these texts*, never a membership score: it is its
own command, not a method of `mia audit-books` (which scores snippets with log-prob methods against calibration books).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..audit.api_estimate import estimate
from ..audit.api_report import api_report_html, api_report_pdf
from ..audit.api_extraction import Text
from ..audit.api_procedures import CLAIM_WORDS
from ..audit.api_verify import verify_run
from ..audit.sources import read_books
from ..blackbox.two_phase import PROFILES, ExtractionSettings
from ..csv_safe import to_csv_safe
from ..model.chat.chat_model import connect_chat
from ..model.chat.prices import Budget, parse_budget
from ..model.chat.spec import is_chat_spec
from ..runs.store import ResultsStore
from .api_runs import BudgetOpt, EstimateOpt, OperatorOpt, PdfOpt, RunIdOpt, StoreOpt, closing_lines, run_api
from .app import fail
from .terminal import echo, one_line

commands = typer.Typer()

#: Columns of books.csv, in order.
CSV_COLUMNS = ["name", "role", "nv_recall", "m", "missing", "additional", "max_block", "claim_blocks", "phase1_s",
               "phase1_success", "halt", "halt_pattern", "halt_step", "phase2_turns", "refusals", "empty",
               "input_tokens", "output_tokens", "n_book_words", "n_generation_words"]


@commands.command("extract-books")
def extract_books(
    model: str = typer.Option(..., "--model", help="a chat API: URL?api=chat&model=NAME&key_env=VAR (docs: Models, "
                              "Chat APIs)"),
    books: str = typer.Option(..., "--books", help="books to extract: .txt/.md/.pdf/.epub, a folder or zip of them, "
                              "or a table with book and text columns"),
    control: str = typer.Option(..., "--control", help="negative control: a text the model cannot have seen (e.g. "
                                "published after its cutoff), in the same forms as --books"),
    output_dir: Path = typer.Option(..., "--output-dir", help="where report.html, books.csv and extraction.json go"),
    profile: str = typer.Option("default", "--profile", help=f"Phase 2 settings: {', '.join(PROFILES)} (the paper's "
                                "rows per provider)"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="answer length per continue turn (default: "
                                             "the profile's)"),
    max_turns: Optional[int] = typer.Option(None, "--max-turns", help="continue turns per book (default: the "
                                            "profile's)"),
    probe_tokens: int = typer.Option(1000, "--probe-tokens", help="answer length of the Phase 1 probe (the paper: "
                                     "1000)"),
    refusal_scope: str = typer.Option("all", "--refusal-scope", help="where refusal patterns are looked for: all (the "
                                      "paper: the whole answer; 'I cannot' in a novel halts it) or head (the first "
                                      "300 characters)"),
    context_tokens: Optional[int] = typer.Option(None, "--context-tokens", help="the model's context window: a turn "
                                                 "that could overflow it halts the book (context_limit)"),
    budget: Optional[str] = BudgetOpt,
    store: Optional[Path] = StoreOpt,
    run_id: Optional[str] = RunIdOpt,
    operator: Optional[str] = OperatorOpt,
    pdf: bool = PdfOpt,
    estimate_only: bool = EstimateOpt,
) -> None:
    """Two-phase extraction of books from a chat API, beside a negative control, with an evidence record."""
    if not is_chat_spec(model):
        fail("--model must be a chat API's spec: a URL with api=chat (or api=completions) and model=NAME, e.g. "
             "https://api.openai.com/v1?api=chat&model=gpt-4.1-2025-04-14&key_env=OPENAI_API_KEY")
    if not output_dir.is_dir():
        fail(f"output folder does not exist: {output_dir}")
    settings = ExtractionSettings.from_profile(profile, max_tokens=max_tokens, max_turns=max_turns,
                                               context_tokens=context_tokens, phase1_max_tokens=probe_tokens,
                                               refusal_scope=refusal_scope)
    if refusal_scope not in ("all", "head"):
        fail(f"--refusal-scope is all or head (got {refusal_scope!r})")
    if settings.max_tokens < 1 or settings.max_turns < 0 or settings.phase1_max_tokens < 1:
        fail("--max-tokens and --probe-tokens must be at least 1, --max-turns at least 0")
    limit = parse_budget(budget) if budget else Budget()
    texts = _texts(books, "book") + _texts(control, "control")
    chat = connect_chat(model)
    echo(f"model: {chat.name} (answered as {chat.answered_model}; tier {chat.tier.name}); {chat.prices.words()}")
    echo(f"estimate: {estimate([(t.text, t.role) for t in texts], settings, chat.prices).words()}")
    if estimate_only:
        return
    results_store = ResultsStore(store)
    outcome = run_api(chat, results_store, texts, settings, budget=limit, run_id=run_id, operator=operator)
    table = outcome.results.reindex(columns=["unit"] + CSV_COLUMNS)
    to_csv_safe(table.drop(columns="unit"), output_dir / "books.csv")
    (output_dir / "report.html").write_text(api_report_html(results_store, outcome.run_id), encoding="utf-8")
    if pdf:
        try:
            (output_dir / "report.pdf").write_bytes(api_report_pdf(results_store, outcome.run_id))
        except RuntimeError as err:  # WeasyPrint or Pango missing
            fail(str(err))
    (output_dir / "extraction.json").write_text(json.dumps(
        {"run_id": outcome.run_id, "status": outcome.status, "message": outcome.message, "head_hash": outcome.head,
         "store": str(results_store.path), "spent": outcome.spent.words(),
         "verify": f"mia verify {outcome.run_id} --store {results_store.path}",
         "results": json.loads(table.to_json(orient="records"))}, indent=2))
    for row in table.itertuples(index=False):
        if isinstance(row.nv_recall, float) and row.nv_recall == row.nv_recall:
            claim = "blocks of ≥ 100 words: extraction evidence for this text" if row.claim_blocks else "no block of ≥ " \
                f"{CLAIM_WORDS} words: not evidence of extraction"
            echo(one_line(f"{row.role} {row.name}: nv-recall {row.nv_recall:.1%} (halt: {row.halt}); {claim}"))
    closing_lines(outcome, store)


@commands.command("verify")
def verify(
    run_id: str = typer.Argument(..., help="the run to check (as mia extract-books printed it)"),
    store: Optional[Path] = typer.Option(None, "--store", help="results store (DuckDB file); default: the shared one"),
) -> None:
    """Re-walk a chat API run's evidence record and recompute its results from the stored answers.

    No network is needed: every number is derived again from the record alone."""
    if store is not None and not store.is_file():
        fail(f"no results store at {store}")
    result = verify_run(ResultsStore(store), run_id)
    if result.fault is not None:
        fail(result.words())
    echo(result.words())


def _texts(source: str, role: str) -> list[Text]:
    """The books of a source as texts of `role`; a source with none is an error naming it."""
    found, problems = read_books(source)
    for problem in problems:
        echo(one_line(f"not read: {problem.book}: {problem.message}"))
    if not found:
        fail(f"no readable text in {source}")
    return [Text(b.name, b.text, role, b.source) for b in found]

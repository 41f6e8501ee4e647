"""What every chat API command shares: its run options (budget, store, run id, operator), running a run with its
progress and cost, and the closing lines (what it spent, the record and the command that verifies it)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import typer

from ..audit.api_extraction import ApiExtractionRun, Outcome, RecordMismatch, Settings, Text
from ..model.chat.chat_model import ChatModel
from ..model.chat.prices import Budget
from ..runs.store import ResultsStore
from .app import fail
from .terminal import echo, one_line

BudgetOpt = typer.Option(None, "--budget", help="stop before passing it: dollars (\"$5\") or tokens (\"2M tokens\"); "
                         "run again with a larger one to go on")
StoreOpt = typer.Option(None, "--store", help="results store (DuckDB file); default: the shared one")
RunIdOpt = typer.Option(None, "--run-id", help="resume or name a run (default: derived from the model, settings and "
                        "texts, so re-running resumes)")
OperatorOpt = typer.Option(None, "--operator", help="who runs it, for the record (default: the login name)")
PdfOpt = typer.Option(False, "--pdf", help="also write report.pdf (WeasyPrint; needs the Pango library)")
EstimateOpt = typer.Option(False, "--estimate", help="print the cost estimate and stop (sends one probe request)")


def run_api(chat: ChatModel, store: ResultsStore, texts: Sequence[Text], settings: Settings, *,
            budget: Budget = Budget(), run_id: Optional[str] = None, operator: Optional[str] = None,
            err: bool = False) -> Outcome:
    """Run (or resume) a chat API run, a line per finished text with the cost so far; a record that is not this
    run's is an error line."""
    try:
        run = ApiExtractionRun(chat, store, texts, settings, budget=budget, run_id=run_id, operator=operator)
        return run.run(lambda name, done, total: echo(one_line(
            f"[{done}/{total}] {name}: done; so far {run.meter.spent.words()}"), err=err) if name else None)
    except RecordMismatch as error:
        fail(str(error))


def closing_lines(outcome: Outcome, store: Optional[Path], *, err: bool = False) -> None:
    """What the run spent, its record's head and the command that verifies it, and why it stopped if it did."""
    echo(f"spent: {outcome.spent.words()}", err=err)
    echo(f"record: run {outcome.run_id}, head {outcome.head}; check it with: mia verify {outcome.run_id}"
         + (f" --store {store}" if store else ""), err=err)
    if outcome.status == "partial":
        echo(f"not finished here: {outcome.message}", err=err)
    if outcome.status == "budget":
        echo(f"stopped: {outcome.message}; run the same command with a larger --budget to go on", err=err)

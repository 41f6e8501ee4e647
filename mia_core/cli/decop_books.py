"""`mia decop-books`: the DE-COP quiz (METHODS-API.md §19) on a chat API — is the original passage picked out of three
paraphrases more often for the audited books than for clean books the model cannot have seen? — every call in the
run's evidence record (`mia verify` re-checks it).

Paraphrases come from the user's tables (ours, or BookTection's columns), made the same way for the audited and the
clean books; MIA Lens makes none offline, because word swaps leave the original identifiable by its fluency.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..audit.api_estimate import quiz_estimate
from ..audit.api_extraction import Text
from ..audit.decop_report import SELF_PARAPHRASED, self_paraphrased, decop_report_html, decop_report_pdf, decop_summary, decop_table, verdict_words
from ..blackbox.decop import DecopSettings
from ..blackbox.decop_passages import QuizBook, read_quiz_books
from ..blackbox.decop_stats import MIN_CLEAN_BOOKS
from ..blackbox.gl_bound import declared_tokenizer
from ..csv_safe import to_csv_safe
from ..inputs.tables import InputError
from ..model.chat.chat_model import connect_chat
from ..model.chat.prices import Budget, parse_budget
from ..model.chat.spec import is_chat_spec
from ..runs.store import ResultsStore
from .api_runs import BudgetOpt, EstimateOpt, OperatorOpt, PdfOpt, RunIdOpt, StoreOpt, closing_lines, run_api
from .app import fail
from .terminal import echo, one_line

commands = typer.Typer()


@commands.command("decop-books")
def decop_books(
    model: str = typer.Option(..., "--model", help="a chat API: URL?api=chat&model=NAME&key_env=VAR (docs: Chat "
                              "APIs)"),
    books: Path = typer.Option(..., "--books", help="the audited books' passages and paraphrases: a .csv/.jsonl with "
                               "book, author, passage, paraphrase_1..3 (or BookTection's ID, Example_A..D, Answer)"),
    clean: Path = typer.Option(..., "--clean", help=f"at least {MIN_CLEAN_BOOKS} clean books (published after the "
                               "model's cutoff), paraphrased the same way, in the same columns"),
    output_dir: Path = typer.Option(..., "--output-dir", help="where report.html, decop.csv and decop.json go"),
    provenance: Optional[str] = typer.Option(None, "--paraphrases-from", help="who made the paraphrases, for the "
                                             "report (e.g. \"Claude 2.0, the authors' prompt\"); default: the tables' "
                                             "paraphrased_by column (mia paraphrase writes it)"),
    letters: str = typer.Option("auto", "--letters", help="auto (the letters' log-probs where the API returns them, "
                                "else the letter answered), logprobs, or answer"),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="the model's tokenizer.json (a local file or "
                                             "folder), to read an API that spells tokens as ids (token_id:N)"),
    beside: Optional[str] = typer.Option(None, "--beside", help="a mia extract-books run of the same model: its "
                                         "books' extraction is shown beside the quiz in the report"),
    budget: Optional[str] = BudgetOpt,
    store: Optional[Path] = StoreOpt,
    run_id: Optional[str] = RunIdOpt,
    operator: Optional[str] = OperatorOpt,
    pdf: bool = PdfOpt,
    estimate_only: bool = EstimateOpt,
) -> None:
    """The DE-COP quiz on a chat API: audited books against clean books, with an evidence record."""
    if not is_chat_spec(model):
        fail("--model must be a chat API's spec: a URL with api=chat (or api=completions) and model=NAME")
    if not output_dir.is_dir():
        fail(f"output folder does not exist: {output_dir}")
    if letters not in ("auto", "logprobs", "answer"):
        fail(f"--letters is auto, logprobs or answer (got {letters!r})")
    limit = parse_budget(budget) if budget else Budget()
    audited, controls = _books(books, provenance), _books(clean, provenance)
    if len(controls) < MIN_CLEAN_BOOKS:
        fail(f"{clean} has {len(controls)} usable book(s): DE-COP compares with at least {MIN_CLEAN_BOOKS} clean books")
    makers = {b.provenance for b in audited + controls}
    if len(makers) > 1:
        fail(f"the audited and clean books' paraphrases were made differently ({'; '.join(sorted(makers))}): a "
             "comparison across paraphrasers is not evidence")
    chat = connect_chat(model)
    maker = next(iter(makers))
    if self_paraphrased(maker, chat.chat.model, chat.answered_model):
        echo(one_line(f"warning: {SELF_PARAPHRASED} ({maker})"))
    if letters == "logprobs" and chat.tier.name != "GL":
        fail(f"{chat.name} returns no log-probs (tier G): use --letters answer")
    logprobs = chat.tier.name == "GL" and letters != "answer"
    if logprobs and chat.tier.token_ids and tokenizer is None:
        fail(f"{chat.name} spells its tokens as ids (token_id:N): give the model's tokenizer with --tokenizer so the "
             "letters can be read, or use --letters answer")
    try:
        path, sha256 = declared_tokenizer(tokenizer)
    except ValueError as err:
        fail(str(err))
    settings = DecopSettings(logprobs=logprobs, tokenizer=path, tokenizer_sha256=sha256)
    echo(f"model: {chat.name} (answered as {chat.answered_model}; tier {chat.tier.name}); {chat.prices.words()}")
    cost = quiz_estimate(audited + controls, settings, chat.prices)
    money = f"${cost.dollars_max:,.2f}" if cost.dollars_max is not None else "cost unknown (no price)"
    echo(f"estimate: {cost.requests_max:,} requests, about {cost.input_max + cost.output_max:,} tokens, {money}")
    if estimate_only:
        return
    texts = [Text(b.title, b.to_json(), "book") for b in audited] + [Text(b.title, b.to_json(), "control")
                                                                     for b in controls]
    results_store = ResultsStore(store)
    outcome = run_api(chat, results_store, texts, settings, budget=limit, run_id=run_id, operator=operator)
    summary, _ = decop_summary(results_store, outcome.run_id)
    table = decop_table(summary)
    to_csv_safe(table, output_dir / "decop.csv")
    try:
        page = decop_report_html(results_store, outcome.run_id, extraction_run=beside)
        (output_dir / "report.html").write_text(page, encoding="utf-8")
        if pdf:
            (output_dir / "report.pdf").write_bytes(decop_report_pdf(results_store, outcome.run_id,
                                                                     extraction_run=beside))
    except (ValueError, RuntimeError) as err:  # not an extraction run; WeasyPrint or Pango missing
        fail(str(err))
    (output_dir / "decop.json").write_text(json.dumps(
        {"run_id": outcome.run_id, "status": outcome.status, "message": outcome.message, "head_hash": outcome.head,
         "store": str(results_store.path), "spent": outcome.spent.words(), "mu": summary.mu,
         "clean": summary.clean, "clean_mean": summary.clean_mean, "clean_sd": summary.clean_sd,
         "verify": f"mia verify {outcome.run_id} --store {results_store.path}",
         "books": json.loads(table.to_json(orient="records"))}, indent=2))
    for words in verdict_words(summary, html=False):
        echo(one_line(words))
    closing_lines(outcome, store)


def _books(path: Path, provenance: str) -> list[QuizBook]:
    """A quiz table's books with at least one passage through the gates; each set-aside passage is named."""
    try:
        found = read_quiz_books(path, provenance=provenance)
    except InputError as err:
        fail(str(err))
    for book in found:
        for problem in book.excluded:
            echo(one_line(f"set aside: {book.title}: {problem}"))
    usable = [b for b in found if b.passages]
    for book in found:
        if not book.passages:
            echo(one_line(f"not quizzed: {book.title}: no passage passed the quality gates"))
    return usable

"""The DE-COP quiz page's parts (METHODS-API.md §19): the two quiz tables read and gated as `mia decop-books` reads
them, the settings, estimate and budget, the run in a background thread with its progress and cost so far, and the
results — each audited book against the clean books, a figure of their accuracies, the clean books' table.

Every string from a table or an answer is escaped here (`ui.markdown.md` for Markdown, `html.escape` for the figure);
the numbers are `mia_core.audit.decop_report`'s, the same as the command line's report.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from mia_core.audit.api_estimate import Estimate
from mia_core.audit.api_extraction import ApiExtractionRun, Text
from mia_core.audit.decop_report import decop_summary, verdict_words
from mia_core.blackbox.decop import DecopSettings
from mia_core.blackbox.decop_passages import QuizBook, read_quiz_books
from mia_core.blackbox.decop_stats import MIN_CLEAN_BOOKS, DecopSummary
from mia_core.limits import MAX_PAGE_BUDGET_DOLLARS, MAX_PAGE_BUDGET_TOKENS
from mia_core.model.chat.chat_model import ChatModel
from mia_core.model.chat.prices import Budget, Prices, parse_budget, prices_for
from mia_core.model.chat.spec import parse_chat_spec
from mia_core.palette import MEMBER, NEUTRAL, NONMEMBER
from mia_core.runs.api_results import run_texts, stored_results
from mia_core.runs.evidence import EvidenceRecord
from mia_core.runs.store import ResultsStore
from ui.jobs import job_state, public_message, start_job
from ui.markdown import md

#: How the answer is read (`mia decop-books --letters`), in words.
LETTERS = {"auto": "auto: log-probs if given", "logprobs": "log-probs of the four letters",
           "answer": "the letter answered"}
LETTERS_HELP = ("auto: the four letters' log-probs where the API returns them (tier GL; calibrated for position "
                "bias), else the letter answered (uncalibrated); as `mia decop-books --letters`.")
#: Set-aside passages listed on the page (the rest are counted; the report has every book's count).
SHOWN_NOTES = 100
#: The audited books' table on the page: header and help per column (st.dataframe escapes the names); accuracies in %.
COLUMN_WORDS = {
    "book": ("audited book", "the book's title, as in its table"),
    "accuracy": ("accuracy %", "questions where the model picked the original, after the position-bias calibration"),
    "accuracy_raw": ("raw accuracy %", "the same before the calibration"),
    "z": ("z", "standard deviations above the clean books' mean accuracy"),
    "percentile": ("percentile", "clean books below this book's accuracy (ties half), in %"),
    "bootstrap_lower": ("95% lower bound %", "the accuracy's one-sided lower bound, its passages resampled"),
    "bootstrap_p": ("bootstrap p", "resamples at or below the clean books' mean"),
    "above_clean": ("above the clean books", "z above 1.645 and bootstrap p below 0.05"),
}
PERCENT_COLUMNS = ("accuracy", "accuracy_raw", "bootstrap_lower")


@dataclass(frozen=True)
class QuizTable:
    """One uploaded quiz table: its books with a passage through the gates, what was set aside (one line each), or
    why it could not be read (one sentence, server paths cut)."""

    name: str
    books: tuple[QuizBook, ...] = ()
    notes: tuple[str, ...] = ()
    error: str | None = None


@st.cache_data(show_spinner=False, max_entries=8)
def _quiz_books(path: str, signature: tuple[int, int], provenance: str | None) -> QuizTable:
    """`read_quiz_books` once per saved file (its size and time are the key) and provenance: gating a 20 MB table is
    not redone on every rerun."""
    name = Path(path).name
    try:
        found = read_quiz_books(path, provenance=provenance)
    except ValueError as err:  # InputError: one sentence naming the file; never a traceback
        return QuizTable(name, error=public_message(str(err)))
    notes = [f"set aside: {b.title}: {problem}" for b in found for problem in b.excluded]
    notes += [f"not quizzed: {b.title}: no passage passed the quality gates" for b in found if not b.passages]
    return QuizTable(name, tuple(b for b in found if b.passages), tuple(notes))


def read_quiz_table(path: Path, provenance: str) -> QuizTable:
    """The usable books of a saved quiz table, as `mia decop-books` reads `--books` and `--clean` (no provenance
    typed: the table's `paraphrased_by` column)."""
    stat = path.stat()
    return _quiz_books(str(path), (stat.st_size, stat.st_mtime_ns), provenance or None)


def notes_markdown(notes: tuple[str, ...]) -> str:
    """The set-aside passages as a Markdown list (names escaped), the first `SHOWN_NOTES` of them."""
    lines = [f"- {md(n)}" for n in notes[:SHOWN_NOTES]]
    if len(notes) > SHOWN_NOTES:
        lines.append(f"- … and {len(notes) - SHOWN_NOTES:,} more")
    return "\n".join(lines)


def clean_problem(table: QuizTable) -> str | None:
    """Why the clean books cannot calibrate a run (the command line's words), or None."""
    if len(table.books) < MIN_CLEAN_BOOKS:
        return (f"{table.name} has {len(table.books)} usable book(s): DE-COP compares with at least {MIN_CLEAN_BOOKS} "
                "clean books (published after the model's training cutoff, paraphrased the same way)")
    return None


def makers_problem(audited: QuizTable, clean: QuizTable) -> str | None:
    """Why the two tables cannot be compared (paraphrases made differently: the command line's words), or None."""
    makers = {b.provenance for b in audited.books + clean.books}
    if len(makers) > 1:
        return (f"the audited and clean books' paraphrases were made differently ({'; '.join(sorted(makers))}): a "
                "comparison across paraphrasers is not evidence")
    return None


def quiz_settings(model: ChatModel, letters: str) -> DecopSettings:
    """The run's settings as `mia decop-books --letters` makes them; a ValueError for log-probs the page cannot read."""
    if letters == "logprobs" and model.tier.name != "GL":
        raise ValueError(f"{model.name} returns no log-probs (tier G): choose “{LETTERS['answer']}”")
    logprobs = model.tier.name == "GL" and letters != "answer"
    if logprobs and model.tier.token_ids:
        raise ValueError(f"{model.name} spells its tokens as ids (token_id:N): its letters can be read only with the "
                         f"model's tokenizer (mia decop-books --tokenizer); here choose “{LETTERS['answer']}”")
    return DecopSettings(logprobs=logprobs)


def estimate_words(cost: Estimate, audited: tuple[QuizBook, ...], clean: tuple[QuizBook, ...]) -> str:
    """The command line's estimate (`quiz_estimate`), with what it covers."""
    money = f"${cost.dollars_max:,.2f}" if cost.dollars_max is not None else "cost unknown (no price)"
    passages = sum(len(b.passages) for b in audited + clean)
    return (f"{cost.requests_max:,} requests, about {cost.input_max + cost.output_max:,} tokens, {money} — "
            f"{len(audited)} audited and {len(clean)} clean book(s), {passages:,} passages, each asked in all 24 "
            "orders of its four options")


def over_budget(cost: Estimate, budget: Budget) -> bool:
    """Whether the estimate passes the budget (the run would stop before it is done)."""
    tokens = cost.input_max + cost.output_max
    return (budget.tokens is not None and tokens > budget.tokens) or (
        budget.dollars is not None and cost.dollars_max is not None and cost.dollars_max > budget.dollars)


def page_budget(text: str, prices: Prices) -> Budget:
    """The budget typed on the page, held to the page's bounds; a ValueError says what is wrong."""
    budget = parse_budget(text)
    if (budget.dollars or 0) > MAX_PAGE_BUDGET_DOLLARS or (budget.tokens or 0) > MAX_PAGE_BUDGET_TOKENS:
        raise ValueError(f"a run from this page spends at most ${MAX_PAGE_BUDGET_DOLLARS:g} or "
                         f"{MAX_PAGE_BUDGET_TOKENS:,} tokens; the command line has no such bound")
    if budget.dollars is not None and not prices.known:
        raise ValueError("a dollar budget needs the API's prices (price_in=/price_out= in the spec); give tokens")
    return budget


def start_quiz(model: ChatModel, store: ResultsStore, audited: tuple[QuizBook, ...], clean: tuple[QuizBook, ...],
               settings: DecopSettings, budget: Budget) -> str:
    """Plan the run as `mia decop-books` does (resumed if it exists) and quiz it in a background thread; its id."""
    texts = [Text(b.title, b.to_json(), "book") for b in audited] + [Text(b.title, b.to_json(), "control")
                                                                     for b in clean]
    run = ApiExtractionRun(model, store, texts, settings, budget=budget, operator="dashboard")
    start_job(run.run_id, lambda: run.run())
    return run.run_id


def run_prices(store: ResultsStore, run_id: str) -> Prices:
    """The prices of the run's own spec (not the sidebar's model, which may have changed since)."""
    try:
        return prices_for(parse_chat_spec(store.run(run_id)["config"]["spec"]))
    except ValueError:  # a price table gone or changed since: the cost is shown in tokens
        return Prices(None, None)


def progress_words(store: ResultsStore, run_id: str) -> tuple[str, bool]:
    """("3 of 11 books quizzed; 72 requests answered, …, $0.0123 so far", whether the run's thread still works)."""
    total = len(run_texts(store, run_id))
    done = len(stored_results(store, run_id))
    requests, input_tokens, output_tokens = EvidenceRecord(store, run_id).usage_totals()
    cost = run_prices(store, run_id).cost(input_tokens, output_tokens)
    money = f"${cost:,.4f} so far" if cost is not None else "cost unknown (no price)"
    job = job_state(run_id)
    working = job is not None and job.state != "done"
    words = (f"{done} of {total} books quizzed (audited and clean); {requests:,} request"
             f"{'' if requests == 1 else 's'} answered, {input_tokens:,} input + {output_tokens:,} output tokens, "
             f"{money}")
    run = store.run(run_id)
    if job is not None and job.error:
        words += f". Stopped: {job.error}"
    elif not working and run["status"] == "stopped" and run.get("message"):
        again = "with a larger budget " if "budget" in str(run["message"]) else ""
        words += f". Stopped: {public_message(str(run['message']))}; press Run again {again}to go on"
    return words, working


@st.cache_data(show_spinner=False, max_entries=16)
def run_summary(store_path: str, run_id: str, done: int) -> DecopSummary:
    """The run's summary from its stored results (`done`, the results stored, keys the cache: the bootstrap is not
    redone on every rerun)."""
    return decop_summary(ResultsStore(store_path), run_id)[0]


def verdict_markdown(summary: DecopSummary) -> list[str]:
    """`verdict_words`, one per audited book, in Markdown: the book's name escaped and in bold."""
    if not summary.compared:
        return [md(w) for w in verdict_words(summary, html=False)]
    return [f"**{md(b.name)}**{md(words[len(b.name):])}" for b, words in zip(summary.books,
                                                                             verdict_words(summary, html=False))]


def shown_books(table: pd.DataFrame) -> pd.DataFrame:
    """`decop_table` as the page shows it: accuracies in %."""
    shown = table.copy()
    for column in PERCENT_COLUMNS:
        shown[column] = shown[column] * 100
    return shown


def clean_table(summary: DecopSummary) -> pd.DataFrame:
    """The clean books that calibrated the run, with their accuracies in %."""
    return pd.DataFrame({"clean book": list(summary.clean), "accuracy %": [100 * a for a in summary.clean.values()]})


def mu_words(summary: DecopSummary) -> str:
    """The calibration μ in words."""
    if summary.mu is None:
        return "none (tier G, or letters read as answered: each question's letter counts as it stands, uncalibrated)"
    return ", ".join(f"{letter} {m:.3f}" for letter, m in zip("ABCD", summary.mu))


def accuracy_figure(summary: DecopSummary, model_name: str) -> go.Figure:
    """Each book's accuracy on one axis: the clean books (blue), each audited book (red when significantly above
    them, grey when not), chance (25%) and the clean books' mean. Names are escaped (plotly reads them as HTML)."""
    fig = go.Figure()
    names = [html.escape(n) for n in summary.clean]
    clean_row = f"{len(names)} clean books"
    fig.add_trace(go.Scatter(x=list(summary.clean.values()), y=[clean_row] * len(names), mode="markers",
                             name="clean books", text=names, marker={"color": NONMEMBER, "size": 11, "opacity": 0.7},
                             hovertemplate="%{text}: %{x:.1%}<extra>clean</extra>"))
    for b in summary.books:
        if b.accuracy is None:
            continue
        colour = MEMBER if b.above_clean else NEUTRAL
        side = "middle left" if b.accuracy > 0.6 else "middle right"  # the name stays inside the axes
        fig.add_trace(go.Scatter(x=[b.accuracy], y=["audited"], mode="markers+text", name=html.escape(b.name),
                                 text=[html.escape(b.name)], textposition=side, showlegend=False,
                                 marker={"color": colour, "size": 15, "symbol": "diamond"},
                                 hovertemplate="%{text}: %{x:.1%}<extra>audited</extra>"))
    fig.add_vline(x=0.25, line={"dash": "dot", "color": NEUTRAL}, annotation_text="chance",
                  annotation_position="top left")
    if summary.clean_mean is not None:
        fig.add_vline(x=summary.clean_mean, line={"dash": "dash", "color": NONMEMBER},
                      annotation_text="clean books' mean", annotation_position="top right")
    fig.update_layout(height=260, margin={"t": 40, "b": 40}, showlegend=False,
                      title={"text": f"Quiz accuracy under {html.escape(model_name)}", "font": {"size": 14}},
                      xaxis={"title": "accuracy: the original picked out of four options", "range": [0, 1.05],
                             "tickformat": ".0%"}, yaxis={"categoryorder": "array",
                                                          "categoryarray": [clean_row, "audited"]})
    return fig

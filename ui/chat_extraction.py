"""The chat API extraction page's parts: texts from uploads, the run in a background thread, its progress with the cost
so far, and one book's diff view (verbatim, missing, additional) beside its numbers.

Everything drawn from a book or an answer is escaped here (`html.escape` for the diff's HTML, `ui.markdown.md` for
Markdown); the run itself is `mia_core.audit.api_extraction`, the same as `mia extract-books`.
"""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from mia_core.audit.api_extraction import ApiExtractionRun, Text
from mia_core.audit.api_verify import replay_conversation
from mia_core.audit.sources import read_books
from mia_core.blackbox.nv_recall import diff_segments, nv_recall
from mia_core.blackbox.two_phase import ExtractionSettings
from mia_core.model.chat.chat_model import ChatModel
from mia_core.model.chat.prices import Budget
from mia_core.runs.api_results import results_table, run_texts, stored_results
from mia_core.runs.evidence import EvidenceRecord
from mia_core.runs.store import ResultsStore
from ui.jobs import job_state, start_job
from ui.markdown import md

#: Most texts one run from the page extracts (books and controls together); the CLI has no such bound.
MAX_PAGE_TEXTS = 20
#: Most book words the diff view draws on the page (the whole diff is a download).
DIFF_SHOWN_WORDS = 4000
DIFF_STYLE = {"verbatim": "background:#c8ecc9", "missing": "color:#888;text-decoration:line-through",
              "additional": "background:#ffe0b2;font-style:italic"}
#: The diff view's legend, in words.
DIFF_LEGEND = ("green: the book's words the model reproduced near-verbatim (in blocks of ≥ 100 words); struck "
               "through: the book's words it did not; orange: words it produced that are not in those blocks")


def read_texts(source, role: str) -> tuple[list[Text], list[str]]:
    """The texts of an uploaded source as `role`, and the problems of the files that could not be read."""
    books, problems = read_books(source)
    return [Text(b.name, b.text, role, Path(b.source).name) for b in books], [f"{p.book}: {p.message}"
                                                                            for p in problems]


def start_run(model: ChatModel, store: ResultsStore, texts: list[Text], settings: ExtractionSettings,
              budget: Budget) -> str:
    """Plan the run in the store and extract it in a background thread (resumed if it exists); its id."""
    run = ApiExtractionRun(model, store, texts, settings, budget=budget, operator="dashboard")
    start_job(run.run_id, lambda: run.run())
    return run.run_id


def progress_words(store: ResultsStore, run_id: str, model: ChatModel) -> tuple[str, bool]:
    """("3 of 5 texts done; 214 requests, …, $1.23 so far", whether the run's thread still works)."""
    total = len(run_texts(store, run_id))
    done = len(stored_results(store, run_id))
    requests, input_tokens, output_tokens = EvidenceRecord(store, run_id).usage_totals()
    cost = model.prices.cost(input_tokens, output_tokens)
    money = f"${cost:,.4f} so far" if cost is not None else "cost unknown (no price)"
    job = job_state(run_id)
    working = job is not None and job.state != "done"
    words = (f"{done} of {total} texts done; {requests:,} request{'' if requests == 1 else 's'} answered, "
             f"{input_tokens:,} input + {output_tokens:,} output tokens, {money}")
    if job is not None and job.error:
        words += f". Stopped: {job.error}"
    return words, working


def result_table(store: ResultsStore, run_id: str) -> pd.DataFrame:
    """The results, one row per text, with the columns a reader compares (names as given; st.dataframe escapes)."""
    table = results_table(store, run_id)
    columns = ["name", "role", "nv_recall", "max_block", "claim_blocks", "m", "missing", "additional", "phase1_s",
               "halt", "halt_pattern", "phase2_turns", "refusals", "input_tokens", "output_tokens"]
    return table.reindex(columns=["unit"] + columns)


def diff_html(store: ResultsStore, run_id: str, unit: str, *, shown_words: int | None = DIFF_SHOWN_WORDS) -> str:
    """One text's diff view as escaped HTML (the first `shown_words` book words; None: all)."""
    manifest = store.run(run_id)["config"]
    text = run_texts(store, run_id).set_index("unit").loc[unit, "text"]
    conversation = replay_conversation(store, run_id, manifest, unit, text)
    segments = diff_segments(text, conversation.generation, nv_recall(text, conversation.generation))
    parts, book_words = [], 0
    for kind, words in segments:
        if shown_words is not None and book_words >= shown_words:
            parts.append('<p style="color:#555">… (the rest is in the download)</p>')
            break
        if kind != "additional":
            book_words += len(words.split())
        parts.append(f'<span style="{DIFF_STYLE[kind]}" title="{kind}">{html.escape(words)}</span> ')
    return '<div style="line-height:1.7;font-family:Georgia,serif">' + "".join(parts) + "</div>"


def numbers_words(row: pd.Series) -> str:
    """One text's numbers, in Markdown (names escaped)."""
    pattern = f" (pattern `{md(str(row['halt_pattern']))}`)" if isinstance(row.get("halt_pattern"), str) else ""
    return (f"**{md(str(row['name']))}** ({row['role']}): nv-recall **{row['nv_recall']:.1%}** — {int(row['m']):,} "
            f"book words in near-verbatim blocks, {int(row['missing']):,} missing, {int(row['additional']):,} "
            f"additional; longest block {int(row['max_block']):,} words; probe score {row['phase1_s']:.2f}; "
            f"halted: {row['halt']}{pattern} after {int(row['phase2_turns'])} continue turns")

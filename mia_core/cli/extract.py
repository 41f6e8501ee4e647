"""`mia extract`: (n,p)-discoverable extraction of texts — one row per window, and a summary per text."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from ..csv_safe import to_csv_safe
from ..extract import ExtractionSettings, extract_texts
from ..extract.result import WINDOW_COLUMNS
from ..inputs import datasets
from ..inputs.tables import read_texts
from ..model.chat.spec import is_chat_spec
from ..model.options import ModelOptions
from .app import fail
from .extract_api import extract_api
from .groups import load, option_groups
from .options import (
    BosOpt, ModelOpt, PrefixOpt, StrideOpt, SuffixOpt, TemperatureOpt, TextColumnOpt, TopKOpt, WindowsOpt, is_named_set,
    writable,
)
from .progress import progress_bar
from .terminal import echo

commands = typer.Typer()


@commands.command("extract")
@option_groups
def extract(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help=".txt/.md/.pdf/.epub (one document = one text, e.g. a book), a "
                               "folder of them, .csv/.tsv/.jsonl/.json, or a built-in set (see: mia datasets)"),
    output: Path = typer.Option(..., "--output", help="CSV, one row per window of every text"),
    summary: Optional[Path] = typer.Option(None, "--summary", help="CSV, one row per text: windows, the share at each "
                                           "p_z threshold, greedy share, extractable passages"),
    prefix: int = PrefixOpt,
    suffix: int = SuffixOpt,
    stride: int = StrideOpt,
    top_k: int = TopKOpt,
    temperature: float = TemperatureOpt,
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    windows: str = WindowsOpt,
    samples: int = typer.Option(100, "--samples", help="chat API: samples per window at temperature 1 (n_s)"),
    per_request: int = typer.Option(1, "--per-request", help="chat API: samples asked per request (n=), where the "
                                    "API offers it"),
    greedy_repeats: int = typer.Option(3, "--greedy-repeats", help="chat API: temperature-0 calls per window"),
    budget: Optional[str] = typer.Option(None, "--budget", help="chat API: stop before passing it (\"$5\", \"2M "
                                         "tokens\")"),
    store: Optional[Path] = typer.Option(None, "--store", help="chat API: results store of the evidence record"),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="chat API: resume or name the run"),
    tokenizer: Optional[Path] = typer.Option(None, "--tokenizer", help="chat API with log-probs (tier GL): the "
                                             "provider's tokenizer.json (a local file or folder); each window then "
                                             "gets an upper bound on its suffix's log-probability"),
    options: ModelOptions = ModelOptions(),
) -> None:
    """Extraction probability per window ((n,p)-discoverable): can the model reproduce each passage verbatim from the
    text before it?"""
    try:
        settings = ExtractionSettings(prefix, suffix, stride, top_k, temperature, bos, windows)
    except ValueError as err:
        fail(str(err))
    data = datasets.load(str(input)) if is_named_set(input) else read_texts(input, text_column=text_column)
    writable(output)
    if summary is not None:
        writable(summary)
    if is_chat_spec(model):  # windows sampled from a chat API: p̂, never the white-box p_z
        extract_api(model, data, output, summary, prefix=prefix, suffix=suffix, stride=stride, samples=samples,
                    per_request=per_request, greedy_repeats=greedy_repeats, budget=budget, store=store, run_id=run_id,
                    tokenizer=tokenizer)
        return
    if tokenizer is not None:
        fail("--tokenizer is for a chat API (tier GL); a model in process uses its own tokenizer")
    lm = load(model, options)
    try:
        results = extract_texts(lm, data["text"].tolist(), settings,
                                progress=progress_bar("extraction (distinct windows)", "windows"))
    except ValueError as err:
        fail(str(err))
    ids = data["id"].astype(str).tolist()
    tables = [r.windows.assign(id=i, window_scheme=settings.windows) for i, r in zip(ids, results)]
    table = pd.concat(tables, ignore_index=True)[["id", "window_scheme", *WINDOW_COLUMNS]] if tables else pd.DataFrame()
    to_csv_safe(table, output)
    rows = [{"id": i, "window_scheme": settings.windows, **r.summary(), **_longest(r)} for i, r in zip(ids, results)]
    if summary is not None:
        to_csv_safe(pd.DataFrame(rows), summary)
    for row in rows:
        echo(_line(row, settings))
    echo(f"wrote {len(table):,} windows ({_scheme(settings)}) to {output}" +
         (f" and a summary per text to {summary}" if summary else ""))


def _scheme(settings: ExtractionSettings) -> str:
    """Which windows were used, in words."""
    if settings.windows == "reference":
        return (f"reference windows: Cooper et al.'s, {settings.stride}-character stride, prefix {settings.prefix} "
                f"tokens with the BOS, ties at the top as 1/m")
    return f"our windows: {settings.stride}-token stride"


def _longest(result) -> dict:
    """The longest passage extractable with p_z ≥ 0.5: its characters, lowest p_z, and its text."""
    found = result.longest_passage()
    if found is None:
        return {"longest_passage_chars": 0, "longest_passage_min_log10_pz": float("nan"), "longest_passage": ""}
    return {"longest_passage_chars": found.chars, "longest_passage_min_log10_pz": found.min_log10_pz,
            "longest_passage": result.text[found.start : found.end]}


def _line(row: dict, settings: ExtractionSettings) -> str:
    """One text's summary as a sentence: a fact about the model, not a statistical inference."""
    if not row["windows"]:
        return f"{row['id']}: shorter than one window ({settings.window} tokens); nothing tested"
    return (f"{row['id']}: {row['windows']:,} windows; p_z ≥ 0.5 in {row['share_pz_ge_0.5']:.1%}, ≥ 0.01 in "
            f"{row['share_pz_ge_0.01']:.1%}, greedy in {row['share_greedy']:.1%}; {row['passages']} extractable "
            f"passage(s), {row['passage_chars']:,} characters")

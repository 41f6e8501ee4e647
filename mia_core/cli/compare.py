"""`mia compare FIRST SECOND`: two runs' per-text scores compared as a pair, method by method (`run_pairing`).

Reads the scores files the Benchmark page downloads (id, text, label, one column per method) or `mia eval
--scores-output` writes (id, label, methods: no text, so matched by id); rows a supervised method learned from
(`in_training_split`) are left out. Prints what the runs share and, per method both scored, ΔAUROC = SECOND − FIRST
with DeLong's test and a paired-bootstrap interval: the Benchmark page's sentences.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import typer

from ..methods import METHODS
from ..inputs.tables import InputError, read_table
from ..run_pairing import compare_runs, delta_sentence, shared_sentence
from .app import fail
from .options import NBootOpt
from .terminal import echo, one_line

commands = typer.Typer()


def read_scores(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rows' id, text if present and label; their method scores) from a scores file; InputError naming it."""
    table = read_table(path)
    methods = [c for c in table.columns if c in METHODS]
    if "label" not in table.columns or not methods:
        raise InputError(f"{path}: not a scores file (it needs a label column and at least one method column, such as "
                         f"those of `mia eval --scores-output`; columns: {', '.join(map(str, table.columns))})")
    labels = pd.to_numeric(table["label"], errors="coerce")
    if not labels.isin([0, 1]).all():
        raise InputError(f"{path}: labels must be 0 (non-member) or 1 (member)")
    if "in_training_split" in table.columns:
        table = table[~table["in_training_split"].astype(str).str.lower().isin(["true", "1"])]
    keep = table.assign(label=labels[table.index].astype(int)).reset_index(drop=True)
    scores = keep[methods].apply(pd.to_numeric, errors="coerce")
    return keep[[c for c in ("id", "text", "label") if c in keep.columns]], scores


@commands.command("compare")
def compare(first: Path = typer.Argument(..., help="scores of the earlier run (CSV/TSV/JSONL): a Benchmark download "
                                         "or mia eval --scores-output"),
            second: Path = typer.Argument(..., help="scores of the later run; ΔAUROC = second − first"),
            by: str = typer.Option("auto", "--by", help="match texts by 'text' (content), 'id', or 'auto' (text when "
                                   "both files hold it)"),
            n_boot: int = NBootOpt,
            seed: int = typer.Option(0, "--seed", help="seed of the paired bootstrap")) -> None:
    """Two runs on the same texts: per method, ΔAUROC with DeLong's test and a paired-bootstrap interval."""
    if n_boot < 100:
        fail(f"--n-boot must be at least 100 (got {n_boot})")
    if by not in ("auto", "text", "id"):
        fail(f"--by must be auto, text or id (got {by!r})")
    data_a, scores_a = read_scores(first)
    data_b, scores_b = read_scores(second)
    if by == "auto":
        by = "text" if "text" in data_a.columns and "text" in data_b.columns else "id"
    if by not in data_a.columns or by not in data_b.columns:
        fail(f"cannot match by {by}: {first if by not in data_a.columns else second} has no {by} column")
    pair = compare_runs(one_line(first.name), data_a, scores_a, one_line(second.name), data_b, scores_b,
                        n_boot=n_boot, seed=seed, by=by)
    echo(f"texts matched by {'content (SHA-256 of the text)' if by == 'text' else 'id'}")
    echo(shared_sentence(pair))
    for result in pair.methods:
        echo(delta_sentence(pair, result, METHODS[result.method].label))
    if not pair.methods and not pair.refused:
        echo("no method was scored by both runs")

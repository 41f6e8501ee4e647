"""`mia audit-unlearning`: chunks whose Min-K% barely moved between the original and the unlearned model.

The audit of Shi et al. 2024 §7.2.1 (see `mia_core.audit.unlearning`): writes every chunk with both
scores, the ratio and the suspect flag to a CSV, suspects first, and prints a summary.
"""
from __future__ import annotations

from pathlib import Path

import typer

from ..audit.unlearning import UnlearningParams, audit_unlearning
from ..csv_safe import to_csv_safe
from ..inputs.tables import read_texts
from ..methods import get_method, stats_only_methods
from ..model.options import ModelOptions
from .app import fail
from .groups import load, option_groups
from .options import BosOpt, KOpt, TextColumnOpt, check_options, writable
from .progress import progress_bar
from .terminal import echo, one_line

commands = typer.Typer()

#: Suspects listed on the terminal (the CSV has them all).
SHOWN = 10


def check_audit_options(*, method: str, chunk_words: int, band: float) -> None:
    """Reject bad option values before any model is loaded."""
    if not get_method(method).stats_only:
        fail(f"--method {method} needs more than the model's statistics; use one of: "
               + ", ".join(sorted(stats_only_methods())))
    if chunk_words < 1:
        fail(f"--chunk-words must be at least 1 (got {chunk_words})")
    if not band > 1:
        fail(f"--band must be greater than 1 (got {band})")


@commands.command("audit-unlearning")
@option_groups
def audit_unlearning_cmd(
    original: str = typer.Option(..., "--original", help="the model before unlearning: 'demo', a folder or a hub id"),
    unlearned: str = typer.Option(..., "--unlearned", help="the model after unlearning"),
    input: Path = typer.Option(..., "--input", help=".txt/.md/.pdf/.epub (one text), a folder of them, "
                               ".csv/.tsv/.jsonl/.json"),
    output: Path = typer.Option(..., "--output", help="CSV, one row per chunk, suspects first"),
    chunk_words: int = typer.Option(512, "--chunk-words", help="words per chunk (the paper: 512)"),
    method: str = typer.Option("min_k", "--method", help="a method that needs only the statistics (see: mia methods)"),
    k: float = KOpt,
    band: float = typer.Option(1.15, "--band", help="suspect when the score ratio lies in (1/band, band)"),
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    options: ModelOptions = ModelOptions(),
) -> None:
    """Unlearning audit (Min-K% paper §7): chunks scoring alike under both models are suspects."""
    check_audit_options(method=method, chunk_words=chunk_words, band=band)
    check_options(k=k, bos=bos, long_text="sliding")
    data = read_texts(input, text_column=text_column)
    writable(output)
    models = load(original, options), load(unlearned, options)
    params = UnlearningParams(chunk_words=chunk_words, method=method, k=k, band=band, bos=bos)
    table = audit_unlearning(*models, data["text"].tolist(), sources=data["id"].tolist(), params=params,
                             progress=progress_bar("scoring chunks under both models", None))
    to_csv_safe(table, output)
    suspects = table[table["suspect"]]
    echo(f"{len(suspects)} of {len(table)} chunks are suspects: {method} ratio in "
               f"({1 / band:.4f}, {band:g}) — the unlearned model scores them about as the original did")
    for row in suspects.head(SHOWN).itertuples():
        words = row.text.split()
        preview = " ".join(words[:12]) + (" …" if len(words) > 12 else "")
        echo(f"  {row.rank:4d}. {one_line(row.chunk_id)}  ratio {row.ratio:.4f}  {one_line(preview)}")
    if len(suspects) > SHOWN:
        echo(f"  … {len(suspects) - SHOWN} more in {output}")
    echo(f"wrote {len(table)} chunks to {output}", err=True)

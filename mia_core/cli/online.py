"""`mia audit-online`: scores of consecutive token windows along long texts (Min-K%++ appendix C).

Each text is scored in one pass with its full left context, then window by window (see
`mia_core.audit.online`). With `--label-column`, the rows are labelled passages of one long text
(joined in file order by a blank line): each window takes the label of the passage holding most
of its tokens, and the window-level AUROC is printed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from ..audit.online import OnlineParams, detect_online, join_passages, label_windows, window_auroc
from ..csv_safe import to_csv_safe
from ..inputs.tables import read_labelled, read_texts
from ..methods import stats_only_methods
from ..model.options import ModelOptions
from .app import fail
from .groups import load, option_groups
from .options import BosOpt, KOpt, ModelOpt, TextColumnOpt, check_options, writable
from .progress import progress_bar
from .terminal import echo

commands = typer.Typer()


@commands.command("audit-online")
@option_groups
def audit_online_cmd(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help=".txt/.md/.pdf/.epub (one text), a folder of them, "
                               ".csv/.tsv/.jsonl/.json"),
    output: Path = typer.Option(..., "--output", help="CSV, one row per window"),
    window: int = typer.Option(32, "--window", help="scored tokens per window (the paper: 32)"),
    stride: Optional[int] = typer.Option(None, "--stride", help="tokens between window starts (default: --window)"),
    method: str = typer.Option("min_k_pp", "--method", help="a method that needs only the statistics"),
    k: float = KOpt,
    label_column: Optional[str] = typer.Option(None, "--label-column", help="rows are labelled passages of one text "
                                               "(1 = member): label the windows and report the window AUROC"),
    text_column: str = TextColumnOpt,
    bos: str = BosOpt,
    options: ModelOptions = ModelOptions(),
) -> None:
    """Sliding-window (online) detection: a score for every window of W tokens along each text."""
    if method not in stats_only_methods():
        fail(f"--method must need only the model's statistics: one of {', '.join(sorted(stats_only_methods()))}")
    if window < 1:
        fail(f"--window must be at least 1 (got {window})")
    if stride is not None and not 1 <= stride <= window:
        fail(f"--stride must be between 1 and --window ({window}) (got {stride})")
    check_options(k=k, bos=bos, long_text="sliding")
    if label_column:
        data = read_labelled(input, text_column=text_column, label_column=label_column)
    else:
        data = read_texts(input, text_column=text_column)
    writable(output)
    lm = load(model, options)
    params = OnlineParams(window=window, stride=stride, method=method, k=k, bos=bos)
    if label_column:
        text, spans = join_passages(data["text"].tolist(), data["label"].tolist())
        stats, table = detect_online(lm, text, params, progress=progress_bar("scoring"))
        table.insert(1, "label", label_windows(stats, table, spans))
        table.insert(0, "id", "joined")
        echo(f"window AUROC ({method}, {window} tokens, {len(table)} windows): "
                   f"{window_auroc(table, table['label']):.4f}")
    else:
        tables = []
        several = len(data) > 1  # one pass per text: count the texts; one long text: its tokens
        progress = progress_bar("scoring", "texts" if several else "tokens")
        for done, (source, text) in enumerate(zip(data["id"], data["text"]), 1):
            _, frame = detect_online(lm, text, params, progress=None if several else progress)
            frame.insert(0, "id", source)
            tables.append(frame)
            if several:
                progress(done, len(data))
        table = pd.concat(tables, ignore_index=True)
    to_csv_safe(table, output)
    echo(f"wrote {len(table)} windows to {output}", err=True)

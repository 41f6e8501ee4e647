"""`mia heatmap`: one text's per-token heatmaps as a standalone HTML page, the same file as Explore's "Heatmaps
(standalone HTML)" download for the same text, model, methods and settings.

The text is read as Explore reads an upload (`inputs.documents.document_text`: .txt/.md/.pdf/.epub). Every method
that needs only the target model is drawn (the statistics, or further passes of the model, as on Explore); a method
that needs more (helper texts, a reference model, a frequency table, a fitted classifier) is refused with what it
needs. A method that cannot score the text (e.g. Tag&Tab with no word to tag) is left out with a warning, as the
page leaves it out of its download.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..api import MODEL_NEEDS, NEED_WORDS
from ..heatmap import heatmap_document, make_panel
from ..inputs.documents import MAX_UPLOAD_BYTES, document_text
from ..methods import get_method, methods_allowed, methods_for
from ..model.options import ModelOptions
from ..scoring import score
from ..stamp import stamp_for
from .app import fail
from .groups import load, option_groups
from .options import BosOpt, KOpt, ModelOpt, ParamOpt, check_options, method_names, parse_params, writable
from .terminal import echo

commands = typer.Typer()

#: The scales offered here (the reference scale needs known non-member texts: Explore offers it).
CLI_SCALES = ("fixed", "text")


@commands.command("heatmap")
@option_groups
def heatmap_cmd(
    model: str = ModelOpt,
    input: Path = typer.Option(..., "--input", help="the text: one .txt/.md/.pdf/.epub file, read as Explore reads "
                               "an upload"),
    output: Path = typer.Option(..., "--output", help="the standalone HTML page to write"),
    methods: str = typer.Option("min_k_pp,min_k", "--methods", help="comma-separated methods that need only the model "
                                "(see: mia methods); one heatmap each, in this order"),
    k: float = KOpt,
    bos: str = BosOpt,
    scale: str = typer.Option("fixed", "--scale", help="fixed: the range each method declares (same score, same colour "
                              "in every text); text: this text's 5th–95th percentile"),
    param: Optional[List[str]] = ParamOpt,
    options: ModelOptions = ModelOptions(),
) -> None:
    """Per-token heatmaps of one text as a standalone HTML page (as Explore's download)."""
    names = method_names(methods)
    check_options(k=k, bos=bos, long_text="sliding")
    if scale not in CLI_SCALES:
        fail(f"--scale must be one of {', '.join(CLI_SCALES)} (got {scale!r})")
    for name in names:
        check_drawable(name)
    params = parse_params(param, names)
    if "k" in params:
        fail("give k with --k, not --param k=…")
    text = read_text(input)
    writable(output)
    lm = load(model, options)
    refused = methods_allowed(lm, names).refused
    if refused:
        fail(next(iter(refused.values())))
    stats = lm.token_stats([text], bos=bos)[0]
    panels = []
    for name in names:
        spec = get_method(name)
        taken = {key: value for key, value in {"k": k, **params}.items() if key in spec.param_names}
        passes = {} if spec.stats_only else {"lm": lm}  # further passes of the model, as Explore runs them
        try:
            panels.append(make_panel(name, score(name, stats, **passes, **taken), scale=scale))
        except ValueError as err:  # e.g. Tag&Tab on a text without a word to tag: left out, as on Explore
            echo(f"warning: {spec.label}: {err}; left out", err=True)
    if not panels:
        fail("no method could score the text")
    stamp = stamp_for(model, lm.fingerprint, text, bos, k=k, **dict(sorted(params.items())))
    output.write_bytes(heatmap_document(stats, panels, stamp, lm.tokenizer.decode).encode("utf-8"))
    echo(f"wrote {len(panels)} heatmaps of {stats.n_scored:,} tokens to {output}", err=True)


def check_drawable(name: str) -> None:
    """Refuse a method that needs more than the target model, saying what it needs."""
    spec = get_method(name)
    more = [n for n in spec.needs if n not in MODEL_NEEDS]
    if more:
        needed = ", ".join(dict.fromkeys(NEED_WORDS.get(n, n) for n in more))
        fail(f"method {name} needs more than the model ({needed}); mia heatmap draws the methods that need the model "
             f"alone: {', '.join(methods_for(MODEL_NEEDS))}")


def read_text(path: Path) -> str:
    """The text of one document file, as Explore reads an upload (size-checked before it is read)."""
    if not path.is_file():
        fail(f"--input must be a .txt/.md/.pdf/.epub file: {path} " + ("is a folder" if path.is_dir() else
                                                                      "does not exist"))
    size = path.stat().st_size
    if size > MAX_UPLOAD_BYTES:
        fail(f"{path}: {size / 1e6:.1f} MB is over the {MAX_UPLOAD_BYTES / 1e6:.0f} MB limit")
    return document_text(path.name, path.read_bytes())

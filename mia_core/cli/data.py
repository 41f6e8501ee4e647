"""`mia freq build`, `mia datasets`, `mia demo build`: the data a run can use (`mia methods`: `cli.methods`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from ..demo.build import build_demo
from ..demo.train import LoraSettings
from ..inputs.benchmarks import BENCHMARKS
from ..inputs.corpus import iter_corpus_texts
from ..inputs.datasets import list_datasets as builtin_sets
from ..methods.dc_pdd.frequency import build_frequency_table
from ..model.options import ModelOptions
from .app import fail
from .groups import load, option_groups
from .options import ModelOpt, writable
from .progress import progress_bar
from .terminal import echo

commands = typer.Typer()
freq_app = typer.Typer(no_args_is_help=True, help="Token-frequency tables (for DC-PDD).")
commands.add_typer(freq_app, name="freq")
demo_app = typer.Typer(no_args_is_help=True, help="The known-membership demo (demo-known, demo-wiki, demo-books).")
commands.add_typer(demo_app, name="demo")


@freq_app.command("build")
@option_groups
def freq_build(
    model: str = ModelOpt,
    output: Path = typer.Option(..., "--output", help="the table (.npz)"),
    corpus: List[Path] = typer.Option([], "--corpus", help="corpus file or folder (.txt/.jsonl/.json, optionally .gz); repeatable"),
    more: List[Path] = typer.Argument(None, help="more corpus paths"),
    text_field: str = typer.Option("text", "--text-field", help="field holding the text in .jsonl/.json"),
    options: ModelOptions = ModelOptions(),
) -> None:
    """Count token occurrences of a reference corpus with the model's tokenizer."""
    sources = list(corpus) + list(more or [])
    if not sources:
        fail("give at least one --corpus PATH")
    for path in sources:
        if not path.exists():
            fail(f"corpus path not found: {path}")
    writable(output)
    lm = load(model, options.on_cpu())  # only the tokenizer and the logits width are used: no GPU needed
    table = build_frequency_table(lm.tokenizer, iter_corpus_texts(sources, text_field=text_field),
                                  vocab_size=lm.vocab_width, corpus_description=", ".join(map(str, sources)))
    if table.total == 0:
        fail(f"the corpus has no tokens: {', '.join(map(str, sources))}")
    table.save(output)
    echo(f"counted {table.total:,} tokens in {table.n_texts:,} texts → {output}", err=True)


@commands.command("datasets")
def list_datasets() -> None:
    """List the built-in labelled sets (usable as --input of mia eval) and the public hub benchmarks."""
    for item in builtin_sets():
        echo(f"{item['name']:12s} {item['description']}")
    echo("\nPublic benchmarks (Benchmark page, or mia_core.inputs.benchmarks.load_benchmark; labels: 1 = member):")
    for name, spec in BENCHMARKS.items():
        where = spec.repo or f"local files only: {spec.home}"
        echo(f"{name:28s} {spec.description}\n{'':28s} caution: {spec.caution}\n"
                   f"{'':28s} source: {where}; licence: {spec.licence}")


@demo_app.command("build")
def demo_build(
    seed: int = typer.Option(0, "--seed", help="seed of the split, the LoRA initialisation and the data order"),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="default: assets/demo-known (the committed copy)"),
    epochs: int = typer.Option(4, "--epochs", help="passes of LoRA training over the member texts"),
    lr: float = typer.Option(1e-3, "--lr", help="learning rate of the LoRA training"),
    traps: bool = typer.Option(False, "--traps", help="build demo-traps instead (default folder assets/demo-traps): "
                               "the same members plus trap passages seen 1, 10 and 100 times (extraction's ground "
                               "truth)"),
) -> None:
    """Rebuild the demo-known adapter from scratch: seeded split, LoRA training on members, manifest."""
    steps = progress_bar("training LoRA on member texts", "steps")

    def progress(step: int, total: int, loss: float) -> None:
        steps(step, total, note=f"loss {loss:.3f}")

    record = build_demo(output_dir, seed=seed, settings=LoraSettings(seed=seed, epochs=epochs, lr=lr), progress=progress,
                        traps=traps)
    echo(json.dumps(record, indent=1))

"""`mia freq build`, `mia datasets`, `mia demo build`, `mia methods`: the data and methods a run can use."""
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
from ..methods import METHODS
from ..methods.dc_pdd.frequency import build_frequency_table
from ..model.loading import load_model
from .app import fail
from .options import ModelOpt, writable
from .progress import progress_bar

commands = typer.Typer()
freq_app = typer.Typer(no_args_is_help=True, help="Token-frequency tables (for DC-PDD).")
commands.add_typer(freq_app, name="freq")
demo_app = typer.Typer(no_args_is_help=True, help="The known-membership demo (demo-known, demo-wiki, demo-books).")
commands.add_typer(demo_app, name="demo")


@freq_app.command("build")
def freq_build(
    model: str = ModelOpt,
    output: Path = typer.Option(..., "--output", help="the table (.npz)"),
    corpus: List[Path] = typer.Option([], "--corpus", help="corpus file or folder (.txt/.jsonl/.json, optionally .gz); repeatable"),
    more: List[Path] = typer.Argument(None, help="more corpus paths"),
    text_field: str = typer.Option("text", "--text-field", help="field holding the text in .jsonl/.json"),
) -> None:
    """Count token occurrences of a reference corpus with the model's tokenizer."""
    sources = list(corpus) + list(more or [])
    if not sources:
        fail("give at least one --corpus PATH")
    for path in sources:
        if not path.exists():
            fail(f"corpus path not found: {path}")
    writable(output)
    lm = load_model(model, device="cpu")  # only the tokenizer and the logits width are used
    table = build_frequency_table(lm.tokenizer, iter_corpus_texts(sources, text_field=text_field),
                                  vocab_size=lm.vocab_width, corpus_description=", ".join(map(str, sources)))
    if table.total == 0:
        fail(f"the corpus has no tokens: {', '.join(map(str, sources))}")
    table.save(output)
    typer.echo(f"counted {table.total:,} tokens in {table.n_texts:,} texts → {output}", err=True)


@commands.command("datasets")
def list_datasets() -> None:
    """List the built-in labelled sets (usable as --input of mia eval) and the public hub benchmarks."""
    for item in builtin_sets():
        typer.echo(f"{item['name']:12s} {item['description']}")
    typer.echo("\nPublic benchmarks (Benchmark page, or mia_core.inputs.benchmarks.load_benchmark; labels: 1 = member):")
    for name, spec in BENCHMARKS.items():
        where = spec.repo or f"local files only: {spec.home}"
        typer.echo(f"{name:28s} {spec.description}\n{'':28s} caution: {spec.caution}\n"
                   f"{'':28s} source: {where}; licence: {spec.licence}")


@demo_app.command("build")
def demo_build(
    seed: int = typer.Option(0, "--seed", help="seed of the split, the LoRA initialisation and the data order"),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="default: assets/demo-known (the committed copy)"),
    epochs: int = typer.Option(4, "--epochs", help="passes of LoRA training over the member texts"),
    lr: float = typer.Option(1e-3, "--lr", help="learning rate of the LoRA training"),
) -> None:
    """Rebuild the demo-known adapter from scratch: seeded split, LoRA training on members, manifest."""
    steps = progress_bar("training LoRA on member texts", "steps")

    def progress(step: int, total: int, loss: float) -> None:
        steps(step, total, note=f"loss {loss:.3f}")

    record = build_demo(output_dir, seed=seed, settings=LoraSettings(seed=seed, epochs=epochs, lr=lr), progress=progress)
    typer.echo(json.dumps(record, indent=1))


@commands.command("methods")
def list_methods() -> None:
    """List the available methods and what each needs."""
    for spec in METHODS.values():
        params = ", ".join(spec.param_names) or "-"
        typer.echo(f"{spec.name:10s} {spec.label:19s} params: {params}\n"
                   f"           needs: {' + '.join(spec.needs)}\n"
                   f"           access: {', '.join(spec.access_words())}; cost: {spec.cost}\n           {spec.summary}")

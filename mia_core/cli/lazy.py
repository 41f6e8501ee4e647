"""A command group that imports a command's module only when that command runs or its help is asked.

Click's "lazily loading subcommands" pattern on Typer's group class: a static table names each
command's module and one-line help, so `mia --help` draws the list without importing torch or
transformers; `mia score …` imports `mia_core.cli.score` and nothing else of the CLI. Each command
module exposes its commands on its own Typer app named `commands`.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import typer.main
from typer import _click
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives (a module with a Typer app `commands`) and the line `mia --help` shows for it."""

    module: str
    help: str


@lru_cache(maxsize=None)
def module_group(module: str) -> TyperGroup:
    """The click group of a command module's Typer app `commands`, built once, flags shown as flags."""
    group = typer.main.get_group(importlib.import_module(module).commands)
    show_flags_as_flags(group)
    return group


def show_flags_as_flags(command: _click.Command) -> None:
    """Give every flag (and the --help option) of a command tree an empty type label: `--flag`, not `--flag <bool>`."""
    ctx = _click.Context(command)
    help_option = command.get_help_option(ctx)  # built once and cached by the command
    for param in [*command.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        show_flags_as_flags(sub)


class LazyGroup(TyperGroup):
    """The root group: commands come from a static table and are imported on first use."""

    def __init__(self, *, table: Mapping[str, LazyCommand], before_run: Callable[[], None] | None = None,
                 **attrs) -> None:
        stubs = {name: TyperCommand(name, help=entry.help) for name, entry in table.items()}
        super().__init__(commands=stubs, **attrs)  # the stubs: help listing and "did you mean" without imports
        self.table = dict(table)
        self.before_run = before_run
        show_flags_as_flags(self)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        """The real command, importing its module (once)."""
        entry = self.table.get(cmd_name)
        return None if entry is None else module_group(entry.module).get_command(ctx, cmd_name)

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        """`mia --help`: drawn by Typer from the stubs, so listing the commands imports none of them."""
        listing = TyperGroup(name=self.name, commands=self.commands, help=self.help, params=self.params,
                             rich_markup_mode=self.rich_markup_mode)
        show_flags_as_flags(listing)
        listing.format_help(ctx, formatter)

    def invoke(self, ctx: _click.Context):
        """Run the chosen command, after the once-per-run setup (`before_run`) and before its module is imported."""
        if self.before_run is not None:
            self.before_run()
        return super().invoke(ctx)

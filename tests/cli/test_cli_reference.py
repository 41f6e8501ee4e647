"""The site's command-line reference (docs/cli.md) is generated from the `mia` command itself when the site is built
(docs/_hooks/cli_reference.py): every command and subcommand gets a section with its options."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import typer

from mia_core.cli.app import COMMANDS, app

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "docs" / "_hooks" / "cli_reference.py"


def load_hook():
    spec = importlib.util.spec_from_file_location("cli_reference", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_has_a_section_for_every_command_and_subcommand():
    hook = load_hook()
    ctx = typer.Context(app, info_name="mia")
    expected = []
    for name in COMMANDS:
        expected.append(f"mia {name}")
        command = app.get_command(ctx, name)
        if hasattr(command, "list_commands"):
            expected += [f"mia {name} {sub}" for sub in command.list_commands(typer.Context(command, parent=ctx))]
    assert hook.command_paths() == expected
    page = hook.reference_markdown()
    assert all(f"### `{path}`" in page for path in expected)
    assert "- `--model <str>`: 'demo', a local folder" in page  # options with their help, from the real commands
    assert "- `--help`" not in page


def test_cli_page_carries_the_marker_the_hook_replaces():
    hook = load_hook()
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page.count(hook.MARKER) == 1
    built = hook.on_page_markdown(page, None, None, None)
    assert hook.MARKER not in built and "### `mia score`" in built

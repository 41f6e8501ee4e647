"""MkDocs hook: the command-line reference of `docs/cli.md`, generated from the `mia` command itself.

Where a page has the line `<!-- mia-cli-reference -->`, this hook writes one section per command and subcommand,
walking the real command tree (`mia_core.cli.app.app`; each command's module is imported, as `mia COMMAND --help`
imports it) and reading what `--help` prints: the help text, the usage line, every argument and option with its
default. Nothing in the reference is written by hand, so it cannot drift from the code. Only Typer's public command
objects (its bundled Click) are read; no plugin is needed.
"""
from __future__ import annotations

import html
import re

MARKER = "<!-- mia-cli-reference -->"
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_])")


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace the marker with the generated reference (pages without it are left as they are)."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference_markdown())


def reference_markdown(heading: str = "###") -> str:
    """Markdown for `mia` and every command under it: one `heading` section each, in `mia --help`'s order."""
    import typer

    from mia_core.cli.app import app

    root = typer.Context(app, info_name="mia")
    sections = [_body(app, root)]
    for command, ctx in _walk(app, root):
        sections.append(f"{heading} `{ctx.command_path}`\n\n{_body(command, ctx)}")
    return "\n\n".join(sections) + "\n"


def command_paths() -> list[str]:
    """Every command path the reference documents ("mia score", "mia freq build", …), for tests."""
    import typer

    from mia_core.cli.app import app

    return [ctx.command_path for _, ctx in _walk(app, typer.Context(app, info_name="mia"))]


def _walk(group, parent):
    """(command, its context) for each visible command under `group`, depth first, subcommands after their group."""
    for name in group.list_commands(parent):
        command = group.get_command(parent, name)
        if command is None or getattr(command, "hidden", False):
            continue
        ctx = type(parent)(command, info_name=name, parent=parent)
        yield command, ctx
        if hasattr(command, "list_commands"):
            yield from _walk(command, ctx)


def _body(command, ctx) -> str:
    """A command's help paragraphs, usage line, arguments, options and (for a group) its commands."""
    parts = [_text(paragraph) for paragraph in re.split(r"\n\s*\n", (command.help or "").strip()) if paragraph.strip()]
    parts.append(f"```text\n{ctx.command_path} {' '.join(command.collect_usage_pieces(ctx))}\n```")
    records = {"argument": [], "option": []}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or "--help" in getattr(param, "opts", ()):
            continue
        records.setdefault(param.param_type_name, []).append(record)
    for kind, title in (("argument", "Arguments"), ("option", "Options")):
        if records[kind]:
            parts.append(f"**{title}**\n\n" + "\n".join(f"- `{name}`" + (f": {_text(help)}" if help else "")
                                                        for name, help in records[kind]))
    if hasattr(command, "list_commands"):
        lines = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                first = _text(re.split(r"\n\s*\n", (sub.help or "").strip())[0]) if sub.help else ""
                lines.append(f"- `{ctx.command_path} {name}`" + (f": {first}" if first else ""))
        parts.append("**Commands**\n\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _text(text: str) -> str:
    """Help text as literal Markdown: one line, HTML and Markdown's own characters escaped."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", html.escape(" ".join(text.split()), quote=False))

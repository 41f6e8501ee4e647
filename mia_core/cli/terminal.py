"""What the command line prints, with the control characters of user data shown, never obeyed.

Book names, ids, file names and texts come from files a user may not have written. Printed raw, an escape sequence in
a book name clears the screen, sets the window title, hides a link or draws a fake "all books clean" line; a newline
in it starts a line of its own. `echo` (every line the CLI prints goes through it) writes each control character as
its escape (`\\x1b`, `\\x07`, the bidi overrides that reorder what is shown) and keeps only the line breaks and tabs of
our own messages; `one_line` also escapes line breaks and tabs, for a user value inside a line (a book name in a table
row, a skipped book's reason).
"""
from __future__ import annotations

import re

import typer

from ..names import HIDDEN_CHARS, escaped, shown_name

#: What `shown` escapes: `names.HIDDEN_CHARS`, the controls and bidi characters that make a terminal show text in
#: another order than it is, or obey it; tab and newline stay (our own messages' layout).
_CONTROLS = re.compile(f"[{HIDDEN_CHARS}]")


def shown(text: object) -> str:
    """`text` with every control character but tab and newline written as its escape."""
    return _CONTROLS.sub(escaped, str(text))


def one_line(text: object) -> str:
    """`text` with every control character, line breaks and tabs included, written as its escape (`names.shown_name`,
    as book names are stored)."""
    return shown_name(str(text))


def echo(message: object = "", err: bool = False) -> None:
    """`typer.echo(shown(message))`: the one way the command line prints."""
    typer.echo(shown(message), err=err)

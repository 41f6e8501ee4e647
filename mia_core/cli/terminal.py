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

#: C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidi embeddings, overrides and isolates
#: (U+202A–U+202E, U+2066–U+2069) that make a terminal show text in another order than it is.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: The same, with tab, newline and the line and paragraph separators too: for a value that must stay on its line.
_LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    """`\\x1b`, `\\n`, `\\u202e`: the character as Python writes it in a string literal."""
    return match.group().encode("unicode_escape").decode("ascii")


def shown(text: object) -> str:
    """`text` with every control character but tab and newline written as its escape."""
    return _CONTROLS.sub(_escape, str(text))


def one_line(text: object) -> str:
    """`text` with every control character, line breaks and tabs included, written as its escape."""
    return _LINE_BREAKING.sub(_escape, str(text))


def echo(message: object = "", err: bool = False) -> None:
    """`typer.echo(shown(message))`: the one way the command line prints."""
    typer.echo(shown(message), err=err)

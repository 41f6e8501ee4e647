"""The `mia` Typer app and its console entry point: user errors become one line `error: …` and exit code 2.

Set MIA_DEBUG=1 to see the traceback instead.
"""
from __future__ import annotations

import os
import sys

import click
import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="MIA Lens: was this text in a model's training data?")
freq_app = typer.Typer(no_args_is_help=True, help="Token-frequency tables (for DC-PDD).")
app.add_typer(freq_app, name="freq")
demo_app = typer.Typer(no_args_is_help=True, help="The known-membership demo (demo-known, demo-wiki, demo-books).")
app.add_typer(demo_app, name="demo")
gds_app = typer.Typer(no_args_is_help=True, help="GDS (gradient deviation scores): a supervised method that "
                      "learns from labelled members and non-members.")
app.add_typer(gds_app, name="gds")

#: Errors that are the user's input, not a bug: reported in one line with exit code 2.
USER_ERRORS = (ValueError, KeyError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError)


class Fail(Exception):
    """A user-facing failure already phrased for the terminal."""


def fail(message: str) -> None:
    """Stop the command with `error: message` and exit code 2."""
    raise Fail(message)


def main() -> None:
    """Console entry point: run the app, turning user errors into one line and exit code 2."""
    try:
        app(standalone_mode=False)
    except (Fail, *USER_ERRORS) as err:
        if os.environ.get("MIA_DEBUG"):
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        typer.echo(f"error: {message}", err=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    except (click.exceptions.ClickException, typer.TyperException) as err:  # usage errors (typer vendors its click)
        if not hasattr(err, "show"):
            raise
        err.show()
        sys.exit(getattr(err, "exit_code", 2))

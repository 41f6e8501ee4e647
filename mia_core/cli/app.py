"""The `mia` command group and its console entry point: user errors become one line `error: …` and exit code 2.

The commands are listed here, each with its module and one-line help, and imported only when run
(`lazy.LazyGroup`): `mia --help` loads no model library. Set MIA_DEBUG=1 to see a traceback instead.
"""
from __future__ import annotations

import os
import sys
import warnings

import typer

from .lazy import LazyCommand, LazyGroup
from .quiet import quiet_libraries
from .terminal import echo, one_line

#: Every command, in the order of `mia --help`: its module (with a Typer app `commands`) and one-line help.
COMMANDS = {
    "score": LazyCommand("mia_core.cli.score", "Score texts with membership-inference methods (higher = more likely "
                         "a member)."),
    "eval": LazyCommand("mia_core.cli.score", "Evaluate methods on labelled texts: AUROC with CI, TPR at low FPR, and "
                        "the blind baseline."),
    "extract": LazyCommand("mia_core.cli.extract", "Extraction probability per window ((n,p)-discoverable): can the "
                           "model reproduce each passage verbatim from the text before it?"),
    "extract-books": LazyCommand("mia_core.cli.extract_books", "Two-phase extraction of books from a chat API, beside "
                                 "a negative control, with an evidence record."),
    "paraphrase": LazyCommand("mia_core.cli.paraphrase", "Paraphrase book passages with a chat API for DE-COP, with "
                              "an evidence record."),
    "decop-books": LazyCommand("mia_core.cli.decop_books", "The DE-COP quiz on a chat API: audited books against "
                               "clean books, with an evidence record."),
    "verify": LazyCommand("mia_core.cli.extract_books", "Re-walk a chat API run's evidence record and recompute its "
                          "results from the stored answers."),
    "compare": LazyCommand("mia_core.cli.compare", "Two runs on the same texts: per method, ΔAUROC with DeLong's test "
                           "and a paired-bootstrap interval."),
    "heatmap": LazyCommand("mia_core.cli.heatmap", "Per-token heatmaps of one text as a standalone HTML page (as "
                           "Explore's download)."),
    "dataset-inference": LazyCommand("mia_core.cli.dataset_inference", "Dataset inference (Maini et al. 2024): many "
                                     "methods' scores, a linear model and a t-test over shuffles."),
    "datasets": LazyCommand("mia_core.cli.data", "List the built-in labelled sets (usable as --input of mia eval) and "
                            "the public hub benchmarks."),
    "methods": LazyCommand("mia_core.cli.methods", "List the available methods and what each needs."),
    "audit-books": LazyCommand("mia_core.cli.audit", "Audit books: contamination rate, prevalence and a test per book, "
                               "against calibration books."),
    "audit-online": LazyCommand("mia_core.cli.online", "Sliding-window (online) detection: a score for every window of "
                                "W tokens along each text."),
    "audit-unlearning": LazyCommand("mia_core.cli.unlearning", "Unlearning audit (Min-K% paper §7): chunks scoring "
                                    "alike under both models are suspects."),
    "freq": LazyCommand("mia_core.cli.data", "Token-frequency tables (for DC-PDD)."),
    "demo": LazyCommand("mia_core.cli.data", "The known-membership demo (demo-known, demo-wiki, demo-books)."),
    "fit": LazyCommand("mia_core.cli.fit", "Fit a supervised method on labelled texts and save what it learned (see: "
                       "mia methods)."),
    "reference": LazyCommand("mia_core.cli.reference", "Reference sets: known non-members' scores, for p-values "
                             "(mia score --reference)."),
    "models": LazyCommand("mia_core.cli.models", "Models behind a server: check what one offers before scoring."),
    "cache": LazyCommand("mia_core.cli.cache", "The token-statistics cache (holds the token text of every scored "
                         "text): show it, empty it."),
    "app": LazyCommand("mia_core.cli.dashboard", "Open the dashboard: Streamlit serves it on this machine (needs "
                       "mia-lens's dashboard extra)."),
}

app = LazyGroup(name="mia", table=COMMANDS, before_run=quiet_libraries, no_args_is_help=True,
                help="MIA Lens: was this text in a model's training data?")

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
        with warnings.catch_warnings():  # what quiet_libraries sets lasts for this run only (tests run main in-process)
            app.main(prog_name="mia", standalone_mode=False)
    except (Fail, *USER_ERRORS) as err:
        if os.environ.get("MIA_DEBUG"):
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        echo(f"error: {one_line(message)}", err=True)  # one line, whatever a file name in it holds
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    except typer.TyperException as err:  # usage errors (Typer's own click)
        if not hasattr(err, "show"):
            raise
        err.show()
        sys.exit(getattr(err, "exit_code", 2))

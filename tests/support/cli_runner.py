"""Run the `mia` command line in-process, capturing its output (shared by the CLI tests)."""
from __future__ import annotations

import contextlib
import io
import sys
from unittest import mock

from mia_core.cli import main


def run_cli(*args) -> tuple[int, str, str]:
    """Run `mia ARGS…` in-process (so it shares this process's caches and Ray instance); (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.object(sys, "argv", ["mia", *map(str, args)]):
        try:
            main()
        except SystemExit as exit_:
            code = exit_.code or 0
    return code, out.getvalue(), err.getvalue()

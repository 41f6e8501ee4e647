"""The code version recorded in every run: the package version plus the git commit of a checkout."""
from __future__ import annotations

import functools
import subprocess
from importlib.metadata import version
from pathlib import Path

__version__ = "0.1.0"


@functools.cache
def code_version() -> str:
    """mia_core's version plus the git commit it runs from, when it runs from a checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                                text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{__version__}+{commit}" if commit else __version__


def package_versions(*packages: str) -> dict[str, str]:
    """Installed versions of the named packages (recorded with artifacts that depend on them)."""
    return {p: version(p) for p in packages}

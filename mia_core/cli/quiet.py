"""Keep the libraries' own progress bars and warnings off the terminal while a `mia` command runs.

Called once when a command runs, before its module (and so torch, transformers, datasets) is imported:
the libraries read these variables when they are first imported, so nothing heavy is imported here and
importing `mia_core` changes nothing. Values the user has set are kept (export
`TRANSFORMERS_VERBOSITY=info` to see transformers' messages again). Our own warnings (e.g. a metric
that cannot be resolved) still show, as one line `warning: …`.
"""
from __future__ import annotations

import os
import sys
import warnings

from .terminal import one_line

#: Environment read by the libraries at import: their progress bars off, only errors logged.
QUIET_ENVIRONMENT = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub downloads, and transformers' "Loading weights" bar
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",  # datasets' map/load bars
    "TQDM_DISABLE": "1",  # plain tqdm bars (transformers' GGUF conversion); ours passes disable=False, which wins
    "TRANSFORMERS_VERBOSITY": "error",  # transformers' logger warnings ("Some weights were not initialized …")
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
}
# TOKENIZERS_PARALLELISM is left as the user has it: the tokenizer's threads make tokenising several times faster,
# and the pinned tokenizers (0.23) forks quietly and safely after using them (tests/cli/test_quiet.py checks both).

#: Modules whose Python warnings are theirs to fix, not the user's.
LIBRARIES = (r"(torch|transformers|tokenizers|datasets|huggingface_hub|accelerate|peft|safetensors|gguf|sklearn|pandas|"
             r"numpy)(\..*)?")


def show_one_line(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning as `warning: message` on stderr (the default adds the file, line and source of the call)."""
    (file or sys.stderr).write(f"warning: {one_line(message)}\n")


def quiet_libraries() -> None:
    """Silence the libraries' progress bars, logging and Python warnings (`main` scopes the warning settings)."""
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", module=LIBRARIES)
    warnings.showwarning = show_one_line

"""What a supervised method fitted, on disk without pickle: `spec.json` (what it learned from) + plain arrays (`.npz`).

Shared by every supervised method (GDS's classifier, Probe's linear probe): the same format check, model-fingerprint
check, split description and "was this text a training row" answer, so each method keeps only its own arrays.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..model.identity import text_sha256

if TYPE_CHECKING:  # a type only: the registry imports this module, and it must load no torch
    from ..model.language_model import LanguageModel

SPEC_FILE = "spec.json"


def save_fitted(folder: str | Path, spec: dict, arrays: dict[str, np.ndarray], *, arrays_file: str) -> Path:
    """Write `spec.json` and `arrays_file` (np.savez: plain arrays, no pickle) in `folder` (created; parent must exist)."""
    folder = Path(folder)
    folder.mkdir(exist_ok=True)
    np.savez(folder / arrays_file, **arrays)
    (folder / SPEC_FILE).write_text(json.dumps(spec, indent=1))
    return folder


def load_fitted(folder: str | Path, *, arrays_file: str, fmt: str, what: str, command: str) -> tuple[dict, dict]:
    """(spec, arrays) saved by `save_fitted`, read with `allow_pickle=False`; a clear error when absent or not `fmt`."""
    folder = Path(folder)
    if not (folder / SPEC_FILE).is_file() or not (folder / arrays_file).is_file():
        raise FileNotFoundError(f"no {what} in {folder} (expected {SPEC_FILE} and {arrays_file}; see: {command})")
    try:
        spec = json.loads((folder / SPEC_FILE).read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{folder / SPEC_FILE} is not readable JSON ({err})") from None
    if not isinstance(spec, dict) or spec.get("format") != fmt:
        raise ValueError(f"{folder / SPEC_FILE} is not a {what} spec ({fmt})")
    with np.load(folder / arrays_file, allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    return spec, arrays


def check_model(spec: dict, lm: LanguageModel, *, what: str, why: str, method: str) -> None:
    """ValueError unless the fit was made on this model (same weights fingerprint)."""
    model = spec["model"]
    if model["fingerprint"] != lm.fingerprint:
        raise ValueError(f"this {what} was fitted on model {model['name']!r} (fingerprint {model['fingerprint']}), not "
                         f"on {lm.name!r} (fingerprint {lm.fingerprint}); {why}: fit one for this model "
                         f"(mia fit --method {method})")


def trained_on(spec: dict, text: str) -> bool:
    """True when the text was one of the fit's training rows (its score there is not a test)."""
    return text_sha256(str(text)) in set(spec["split"].get("train_sha256", []))

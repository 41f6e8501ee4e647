"""Reference sets kept on disk per model and setting, so later texts and later sessions reuse them.

Scoring a reference set (the demo's is 120 texts) is the slow part of a first p-value; its scores depend
only on the model (fingerprint and dtype), the texts, the methods and their settings, and the code. Those,
hashed, name a folder under `<cache root>/references/` (`mia_core.paths.cache_root`: `$MIA_LENS_CACHE`, else
`~/.cache/mia-lens`) holding the set as `save_reference` writes it: scores and text hashes, never the texts.
A changed model, text, setting or code version is another key, so a stale set is never reused.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Sequence

from ..model.identity import text_sha256
from ..model.language_model import LanguageModel
from ..paths import cache_root
from ..version import code_version
from .build import build_reference
from .progress import TextsProgress
from .reference_set import FORMAT, ReferenceSet, is_reference_folder, load_reference, save_reference

#: The folder under the cache root that holds the kept reference sets.
FOLDER = "references"


def references_dir() -> Path:
    """Where kept reference sets live: `<cache root>/references`."""
    return cache_root() / FOLDER


def reference_key(lm: LanguageModel, texts: Sequence[str], methods: Sequence[str], *, k: float | None, bos: str,
                  long_text: str, params: dict, source: str) -> str:
    """24 hex digits naming a reference set: a hash of everything its scores (and its description) depend on."""
    what = {"format": FORMAT, "fingerprint": lm.fingerprint, "dtype": str(lm.dtype), "methods": list(methods),
            "k": k, "bos": bos, "long_text": long_text, "params": params, "source": source,
            "code": code_version(), "texts": [text_sha256(str(t)) for t in texts]}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=repr).encode()).hexdigest()[:24]


def kept_reference(lm: LanguageModel, texts: Sequence[str], methods: Sequence[str], *, k: float | None = None,
                   bos: str = "auto", long_text: str = "sliding", params: dict | None = None,
                   source: str = "") -> ReferenceSet | None:
    """The reference set kept for exactly this model, texts and setting, or None (also for a damaged folder)."""
    folder = references_dir() / reference_key(lm, texts, methods, k=k, bos=bos, long_text=long_text,
                                              params=dict(params or {}), source=source)
    if not is_reference_folder(folder):
        return None
    try:
        return load_reference(folder)
    except ValueError:  # damaged (a disk full mid-write): scored again
        return None


def cached_reference(lm: LanguageModel, texts: Sequence[str], methods: Sequence[str], *, k: float | None = None,
                  bos: str = "auto", long_text: str = "sliding", params: dict | None = None, source: str = "",
                  progress: Callable[[int, int], None] | None = None,
                  on_texts: Callable[[TextsProgress], None] | None = None) -> ReferenceSet:
    """The kept reference set for this model, texts and setting, else scored now (`build_reference`) and kept."""
    params = dict(params or {})
    found = kept_reference(lm, texts, methods, k=k, bos=bos, long_text=long_text, params=params, source=source)
    if found is not None:
        return found
    reference = build_reference(lm, texts, methods, k=k, bos=bos, long_text=long_text, params=params, source=source,
                                progress=progress, on_texts=on_texts)
    _keep(reference, references_dir() / reference_key(lm, texts, methods, k=k, bos=bos, long_text=long_text,
                                                       params=params, source=source))
    return reference


def _keep(reference: ReferenceSet, folder: Path) -> None:
    """Write the set beside `folder` and rename it into place, so a reader never sees half a set; a set another
    process kept first stays."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        save_reference(reference, partial)
        os.replace(partial, folder)
    except OSError:  # kept by another process meanwhile (the folder exists), or the disk is full: not kept
        pass
    finally:
        shutil.rmtree(partial, ignore_errors=True)

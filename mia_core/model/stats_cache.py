"""Disk cache of `TokenStats`, one `.npz` per text, keyed by model, policies and text hash.

A second request for the same texts under the same model fingerprint, dtype, BOS policy and
long-text policy is answered from disk without running the model. Files are written atomically
and read with `allow_pickle=False`.
"""
from __future__ import annotations

import hashlib
import json
import uuid
import zipfile
from pathlib import Path

import numpy as np

from .identity import text_sha256
from .token_stats import ARRAY_FIELDS, TokenStats, stats_from_parts, stats_parts


class StatsCache:
    """A folder of cached token statistics."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def key(self, model_key: str, text: str) -> str:
        """Cache key of a text under a model/policy key."""
        return hashlib.sha256(f"{model_key}|{text_sha256(text)}".encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.npz"

    def get(self, key: str, text: str) -> TokenStats | None:
        """The cached statistics, or None (a missing or unreadable entry is a miss)."""
        path = self._path(key)
        if not path.exists():
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in ARRAY_FIELDS}
                meta = json.loads(str(data["meta"]))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # unreadable entry: a miss
            return None
        return stats_from_parts(text, arrays, meta)

    def put(self, key: str, stats: TokenStats) -> None:
        """Store statistics atomically (write to a temporary file, then rename)."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays, meta = stats_parts(stats)
        tmp = path.with_name(f"{path.stem}.{uuid.uuid4().hex}.tmp.npz")  # unique per writer (threads too)
        np.savez(tmp, meta=np.array(json.dumps(meta)), **arrays)
        tmp.replace(path)

"""The statistics task of the Ray backend: `TokenStats` computed on a worker, packed as npz bytes for the trip back."""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd

from ..model.language_model import LanguageModel
from ..api.token_stats import ARRAY_FIELDS, TokenStats, stats_from_parts, stats_parts


def stats_task(lm: LanguageModel, texts: list[str], job: dict) -> pd.DataFrame:
    """One packed `TokenStats` per text (column `payload`), under the job's BOS and long-text policies."""
    stats = lm.token_stats(texts, bos=job["bos"], long_text=job["long_text"])
    return pd.DataFrame({"payload": np.array([pack_stats(s) for s in stats], dtype=object)})


def stats_failed(n: int) -> pd.DataFrame:
    """The rows of a failed statistics chunk (empty payloads)."""
    return pd.DataFrame({"payload": np.array([b""] * n, dtype=object)})


def pack_stats(stats: TokenStats) -> bytes:
    """Per-token arrays and flags of one text as npz bytes (the text itself stays on the driver)."""
    arrays, meta = stats_parts(stats)
    buffer = io.BytesIO()
    meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode(), np.uint8)  # UTF-8, not numpy's UTF-32
    np.savez(buffer, meta=meta_bytes, **arrays)
    return buffer.getvalue()


def unpack_stats(payload: bytes, text: str) -> TokenStats:
    """The `TokenStats` packed by `pack_stats`, for `text`."""
    with np.load(io.BytesIO(payload), allow_pickle=False) as data:
        arrays = {name: data[name] for name in ARRAY_FIELDS}
        meta = json.loads(data["meta"].tobytes().decode())
    return stats_from_parts(text, arrays, meta)

"""What a served model is: its fingerprint from a fixed probe text's log-probs, and whether its log-probs depend on
what else the server is computing (prefix caching and batch order can change them: vLLM issue #42019).

The first time a model behind a URL is seen, its probe log-probs are recorded under `<cache>/served`; later
connections that give the same log-probs (within `SAME_MODEL_TOL`) get the same fingerprint, so results and cached
statistics are reused, and a different model behind the same URL and name gets a new fingerprint and never mixes
with the old results.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path

import numpy as np

#: The fixed text whose log-probs identify a served model (a plain, common sentence: every tokenizer handles it).
PROBE_TEXT = ("The quick brown fox jumps over the lazy dog, and the committee agreed to publish its report on the "
              "history of the river in the spring of 1921.")
#: Texts scored at the same time as the probe, to see whether concurrency changes its log-probs.
CROWD_TEXTS = tuple(f"Paragraph {n}: a reader of the annual almanac counted {n * 7} birds along the northern shore."
                    for n in range(1, 9))
#: Probe log-probs within this (max absolute difference) are the same model (servers differ in float rounding).
SAME_MODEL_TOL = 1e-3
#: The probe scored alone and in a crowd must agree this closely, else the server is not deterministic.
DETERMINISM_TOL = 1e-4
FORMAT = 1


def served_identity(folder: Path, where: str, probe: np.ndarray) -> tuple[str, dict]:
    """(fingerprint, its record) of the model that gave `probe` at `where` (URL, name, server root, tokenizer):
    an earlier fingerprint when the probe matches one recorded there, else a new one, recorded."""
    records = _read(folder, where)
    for record in records:
        known = np.asarray(record["probe"], np.float64)
        if known.shape == probe.shape and float(np.max(np.abs(known - probe), initial=0.0)) <= SAME_MODEL_TOL:
            return record["fingerprint"], record
    digest = hashlib.sha256(f"{where}|{uuid.uuid4().hex}".encode()).hexdigest()[:16]
    record = {"fingerprint": f"served-{digest}", "probe": [round(float(v), 6) for v in probe], "determinism": None}
    _write(folder, where, records + [record])
    return record["fingerprint"], record


def record_determinism(folder: Path, where: str, fingerprint: str, gap: float) -> None:
    """Record the probe's largest difference alone vs in a crowd, for every later connection to that model."""
    records = _read(folder, where)
    for record in records:
        if record["fingerprint"] == fingerprint:
            record["determinism"] = float(gap)
    _write(folder, where, records)


def determinism_warning(gap: float | None) -> str | None:
    """The warning for a recorded probe gap (None when unprobed or deterministic)."""
    if gap is None or gap <= DETERMINISM_TOL:
        return None
    return (f"this server's log-probs change with what else it computes (the probe text differed by {gap:.2g} alone "
            "vs among other requests): scores are not exactly repeatable. Start vLLM with "
            "--no-enable-prefix-caching (vLLM issue #42019)")


def _path(folder: Path, where: str) -> Path:
    return folder / f"{hashlib.sha256(where.encode()).hexdigest()[:24]}.json"


def _read(folder: Path, where: str) -> list[dict]:
    path = _path(folder, where)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("where") != where:
        return []
    return [r for r in data.get("records", []) if isinstance(r, dict) and isinstance(r.get("probe"), list)]


def _write(folder: Path, where: str, records: list[dict]) -> None:
    """Write atomically (a concurrent reader sees the old file or the new one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = _path(folder, where)
    tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps({"format": FORMAT, "where": where, "records": records}))
    os.replace(tmp, path)

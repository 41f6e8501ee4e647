"""`max_memory` (`--max-memory`): a per-device memory cap such as "cuda:0=20GiB,cuda:1=20GiB,cpu=30GiB", read into
accelerate's form ({0: bytes, 1: bytes, "cpu": bytes}) before anything is loaded.

Light on purpose (no torch): the command line checks the option when it starts; whether the named devices exist
is checked when the model is loaded (`mia_core.model.sharding`).
"""
from __future__ import annotations

import re

#: Device names a cap may name besides CUDA GPUs ("cuda:N", or N alone, as accelerate writes them).
OTHER_DEVICES = ("cpu", "mps", "disk")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"B": 1, **{f"{p}B": 1000 ** (i + 1) for i, p in enumerate("KMGT")},
          **{f"{p}IB": 1024 ** (i + 1) for i, p in enumerate("KMGT")}}
EXAMPLE = "cuda:0=20GiB,cuda:1=20GiB,cpu=30GiB"

MemoryMap = dict[int | str, int]


def parse_max_memory(value: str | dict | None) -> MemoryMap | None:
    """The cap as accelerate's `max_memory` ({GPU index or "cpu"/"mps"/"disk": bytes}), or None when none is given.

    value : "DEVICE=SIZE,…" (DEVICE: cuda:N, N, cpu, mps or disk; SIZE: bytes or a number with B, KB, MB, GB, TB,
        KiB, MiB, GiB or TiB), or a dict of the same. Raises ValueError saying what is wrong and how to write it.

    >>> parse_max_memory("cuda:0=1GiB, cpu=512MB")
    {0: 1073741824, 'cpu': 512000000}
    """
    if value is None:
        return None
    if isinstance(value, dict):
        pairs = [(str(k), v) for k, v in value.items()]
    else:
        pairs = []
        for part in str(value).split(","):
            if not part.strip():
                continue
            device, sep, size = part.partition("=")
            if not sep:
                raise ValueError(_problem(f"{part.strip()!r} has no '='"))
            pairs.append((device, size))
    if not pairs:
        raise ValueError(_problem("it names no device"))
    out: MemoryMap = {}
    for device, size in pairs:
        key = device_key(device)
        if key in out:
            raise ValueError(_problem(f"{device.strip()!r} is named twice"))
        out[key] = size_bytes(size, device.strip())
    return out


def device_key(name: str) -> int | str:
    """accelerate's key for a device name: "cuda:1" or "1" → 1; "cpu", "mps", "disk" as they are."""
    text = name.strip().lower()
    index = text.removeprefix("cuda:")
    if index.isdigit():
        return int(index)
    if text in OTHER_DEVICES:
        return text
    raise ValueError(_problem(f"unknown device {name.strip()!r} (use cuda:N, cpu, mps or disk)"))


def size_bytes(size: int | float | str, device: str) -> int:
    """Bytes of a size: an int, or a string such as "20GiB", "512MB", "1.5GB" (positive)."""
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        number, unit = float(size), "B"
    else:
        found = _SIZE.match(str(size))
        if not found:
            raise ValueError(_problem(f"{device}={size!s}: the size is not a number with a unit like 20GiB"))
        number, unit = float(found.group(1)), (found.group(2) or "B").upper()
    count = int(number * _UNITS[unit])
    if count <= 0:
        raise ValueError(_problem(f"{device}={size!s}: the size must be positive"))
    return count


def _problem(what: str) -> str:
    """The message for a cap that cannot be read: what is wrong, then how to write one."""
    return f"--max-memory (max_memory): {what}; write DEVICE=SIZE pairs, e.g. {EXAMPLE}"

"""Disk cache of `TokenStats`, one file per text, keyed by model, policies and text hash.

A second request for the same texts under the same model fingerprint, dtype, BOS policy and
long-text policy is answered from disk without running the model. Files are written atomically.
An entry (`<key>.stats`) is one read and one write: a magic line, the length of a JSON header (the
text's metadata, and each array's name, dtype, shape and place), then the arrays' raw bytes — no
pickle, no zip (the `.npz` entries of earlier versions cost 0.4 ms to write and to read per text,
more than the model's time per text on a GPU; they are no longer read, but are counted and evicted
like the others until they go). Entries hold the token text of every scored text, so the folder is
capped (`$MIA_LENS_CACHE_MAX_MB`): past the cap the least recently used entries go.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .identity import text_sha256
from ..api.token_stats import ARRAY_FIELDS, FLOAT_FIELDS, TokenStats, stats_from_parts, stats_parts

#: The cap, in MB (2^20 bytes), unless `$MIA_LENS_CACHE_MAX_MB` says otherwise (0: keep nothing). At 70–130 bytes
#: per scored token (127 measured on short texts), 1 GB holds 8–15 million tokens: several benchmark runs, while
#: the token text of everything ever scored cannot fill a disk.
DEFAULT_MAX_MB = 1024
MAX_MB_ENV = "MIA_LENS_CACHE_MAX_MB"
#: Eviction empties down to this share of the cap, so a full cache is not rescanned on every write.
EVICT_TO = 0.9
#: The folder is rescanned after this process wrote this share of the cap since the last scan: other
#: processes' writes are seen then, so k processes writing at once overshoot the cap by at most ≈ k × 10%.
RESCAN_EVERY = 0.1
MB = 1 << 20
#: The file name suffix of an entry, and of the entries of earlier versions (counted and evicted, never read).
SUFFIX = ".stats"
OLD_SUFFIXES = (".npz",)
#: First bytes of an entry, then the header's length (8 bytes, little-endian), the JSON header and the arrays.
MAGIC = b"MIA-LENS-STATS-1\n"
#: Native arrays are stored as they are on a little-endian machine (entries are little-endian).
LITTLE_ENDIAN = sys.byteorder == "little"
#: The array dtypes an entry may hold (anything else is an unreadable entry: a miss).
DTYPES = ("<i8", "<f4", "<f8")


def max_bytes_from_env() -> int:
    """The cap in bytes: `$MIA_LENS_CACHE_MAX_MB` megabytes, else `DEFAULT_MAX_MB`; ValueError on a bad value."""
    raw = os.environ.get(MAX_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_MB * MB
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{MAX_MB_ENV} must be a size in megabytes, 0 or more (got {raw!r})")
    return int(value * MB)


@dataclass(frozen=True)
class CacheUsage:
    """What a cache folder holds: its path, number of entries and their bytes on disk."""

    path: Path
    entries: int
    bytes: int


@dataclass
class _Tally:
    """This process's count of a cache folder's bytes: on disk at the last scan, plus what it wrote since."""

    lock: threading.Lock
    size: int | None = None
    since_scan: int = 0


_TALLIES: dict[Path, _Tally] = {}  # one per folder: every `StatsCache` (model, session) of a process adds up
_TALLIES_LOCK = threading.Lock()


class StatsCache:
    """A folder of cached token statistics, at most `max_bytes` (None: from `$MIA_LENS_CACHE_MAX_MB`)."""

    def __init__(self, root: str | Path, max_bytes: int | None = None):
        self.root = Path(root)
        self._root = os.fspath(self.root)  # entry paths are joined as strings: a lookup per text, pathlib's cost each
        self.max_bytes = max_bytes_from_env() if max_bytes is None else int(max_bytes)
        self._folders: set[str] = set()  # key-prefix folders this instance made or found
        with _TALLIES_LOCK:
            self._tally = _TALLIES.setdefault(self.root.absolute(), _Tally(threading.Lock()))

    def key(self, model_key: str, text: str) -> str:
        """Cache key of a text under a model/policy key."""
        return hashlib.sha256(f"{model_key}|{text_sha256(text)}".encode()).hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self._root, key[:2], key + SUFFIX)

    def has(self, key: str) -> bool:
        """Whether an entry is stored under `key` (a look at the file only: an estimate's count, not a read)."""
        return os.path.exists(self._path(key))

    def get(self, key: str, text: str) -> TokenStats | None:
        """The cached statistics, or None (a missing or unreadable entry is a miss); a hit marks the entry as used."""
        found = self.get_arrays(key)
        if found is None or not _token_stats_shaped(found[0]):
            return None
        try:
            return stats_from_parts(text, *found)
        except (KeyError, ValueError, TypeError, OverflowError):  # well-formed arrays, metadata of another shape: a miss
            return None

    def get_arrays(self, key: str) -> tuple[dict[str, np.ndarray], dict] | None:
        """(arrays, metadata) of an entry, or None (missing or unreadable); a hit marks the entry as used. Other
        passes' per-text results (extraction windows) are stored this way beside the statistics, under their own keys."""
        path = self._path(key)
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:  # missing, or just evicted
            return None
        found = _decode(data)
        if found is None:
            return None
        try:
            os.utime(path)  # least recently used goes first
        except OSError:  # a read-only cache, or evicted meanwhile: still a hit
            pass
        return found

    def put(self, key: str, stats: TokenStats) -> None:
        """Store statistics atomically (write to a temporary file, then rename), then keep the folder under the cap."""
        arrays, meta = stats_parts(stats)
        self.put_arrays(key, {name: arrays[name] for name in ARRAY_FIELDS}, meta)

    def put_many(self, entries: list[tuple[str, TokenStats]]) -> None:
        """`put` of each (key, statistics) entry in order (one writer-thread task for a batch's texts); the first
        failure is raised, the entries after it are not written."""
        for key, stats in entries:
            self.put(key, stats)

    def put_arrays(self, key: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
        """Store named arrays (int64, float32 or float64) and JSON metadata atomically, within the cap (`put`)."""
        if self.max_bytes <= 0:
            return
        path = self._path(key)
        head, blobs = _encode(arrays, meta)
        written = len(head) + sum(a.nbytes for a in blobs)
        if written > self.max_bytes:  # it would only evict every entry, itself too (a long text's ~60 B per token)
            return
        folder = os.path.dirname(path)
        tmp = os.path.join(folder, f"{key}.{uuid.uuid4().hex}.tmp")  # unique per writer (threads too)
        if folder not in self._folders:  # made once per prefix and instance, not tried and failed per entry
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        try:
            try:
                _write(tmp, head, blobs)
            except FileNotFoundError:  # the folder was removed meanwhile (by hand, or another process)
                os.makedirs(folder, exist_ok=True)
                _write(tmp, head, blobs)
        except BaseException:  # a full disk, say: no half-written temporary file is left
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        try:
            os.replace(tmp, path)
        except FileNotFoundError:  # `clear` ran meanwhile: the entry is simply not cached
            return
        self._count(written)

    def _count(self, written: int) -> None:
        """Add a written entry's bytes to the folder's tally; past the cap, evict the least recently used entries."""
        tally = self._tally
        with tally.lock:
            tally.since_scan += written
            if tally.size is None or tally.since_scan >= RESCAN_EVERY * self.max_bytes:
                tally.size, tally.since_scan = self.usage().bytes, 0
            else:
                tally.size += written
            if tally.size > self.max_bytes:
                tally.size = self._evict(int(EVICT_TO * self.max_bytes))

    def _entries(self) -> list[tuple[float, int, Path]]:
        """(last use, bytes, path) of every entry: `<2 hex>/<64 hex>.stats` files (and earlier versions' `.npz`)."""
        out = []
        for path in self.root.glob("??/*"):
            if len(path.stem) == 64 and path.suffix in (SUFFIX, *OLD_SUFFIXES):
                try:
                    st = path.stat()
                except OSError:  # removed meanwhile (another process)
                    continue
                out.append((st.st_mtime, st.st_size, path))
        return out

    def _evict(self, target: int) -> int:
        """Remove least recently used entries until at most `target` bytes remain; returns the bytes left."""
        found = sorted(self._entries(), key=lambda e: e[0])
        size = sum(b for _, b, _ in found)
        for _, nbytes, path in found:
            if size <= target:
                break
            path.unlink(missing_ok=True)
            size -= nbytes
        return size

    def usage(self) -> CacheUsage:
        """Entries and bytes on disk now (every process's writes)."""
        found = self._entries()
        return CacheUsage(self.root, len(found), sum(b for _, b, _ in found))

    def clear(self) -> CacheUsage:
        """Remove every entry (and stray temporary files of crashed writers); returns what was removed."""
        with self._tally.lock:
            removed = self.usage()
            for _, _, path in self._entries():
                path.unlink(missing_ok=True)
            for tmp in [*self.root.glob("??/*.tmp"), *self.root.glob("??/*.tmp.npz")]:
                tmp.unlink(missing_ok=True)
            self._tally.size, self._tally.since_scan = 0, 0
        return removed


def _encode(arrays: dict[str, np.ndarray], meta: dict) -> tuple[bytes, list[np.ndarray]]:
    """One entry: its head (the magic, the header's length, the header: metadata, arrays' places), then the arrays
    to write after it as they are (a long text's arrays are not copied into one buffer first)."""
    places, blobs, offset = [], [], 0
    for name, array in arrays.items():
        if not (isinstance(array, np.ndarray) and array.ndim and array.flags.c_contiguous and array.dtype.isnative
                and LITTLE_ENDIAN):  # else converted; a native little-endian array is stored as it is
            array = np.ascontiguousarray(array)
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        places.append([name, array.dtype.str, list(array.shape), offset, array.nbytes])
        blobs.append(array)
        offset += array.nbytes
    header = json.dumps({"meta": meta, "arrays": places}).encode()
    return b"".join([MAGIC, struct.pack("<Q", len(header)), header]), blobs


def _write(path: str, head: bytes, arrays: list[np.ndarray]) -> None:
    """Write an entry's head and then its arrays' bytes to a new file, in one `writev` call where the system has it
    (a short text's entry is ten small buffers: one call, not ten)."""
    buffers = [memoryview(head), *(memoryview(array.reshape(-1)).cast("B") for array in arrays)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0), 0o666)
    try:
        while buffers:
            done = os.writev(fd, buffers) if hasattr(os, "writev") else os.write(fd, buffers[0])
            if not done and any(len(b) for b in buffers):
                raise OSError(f"no bytes written to {path}")
            while buffers and done >= len(buffers[0]):  # a partial write goes on from where it stopped
                done -= len(buffers[0])
                buffers.pop(0)
            if buffers and done:
                buffers[0] = buffers[0][done:]
    finally:
        os.close(fd)


def _decode(data: bytes) -> tuple[dict[str, np.ndarray], dict] | None:
    """(arrays, metadata) of an entry's bytes, or None when they are not a whole, well-formed entry."""
    start = len(MAGIC) + 8
    if not data.startswith(MAGIC) or len(data) < start:
        return None
    (length,) = struct.unpack_from("<Q", data, len(MAGIC))
    body = start + length  # where the arrays begin
    try:
        header = json.loads(data[start:body])
        memory = bytearray(data)  # one writable copy the arrays share
        arrays = {}
        for name, dtype, shape, offset, nbytes in header["arrays"]:
            count = int(np.prod(shape, dtype=np.int64))
            if dtype not in DTYPES or offset < 0 or body + offset + nbytes > len(data) or \
                    count * np.dtype(dtype).itemsize != nbytes:
                return None
            arrays[name] = np.frombuffer(memory, dtype=dtype, count=count, offset=body + offset).reshape(shape)
        return arrays, header["meta"]
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError):  # truncated or altered: a miss
        return None


def _token_stats_shaped(arrays: dict[str, np.ndarray]) -> bool:
    """Whether an entry's arrays are a `TokenStats`'s: every field, one row per scored token, of the right kind."""
    if set(arrays) != set(ARRAY_FIELDS) or arrays["token_ids"].ndim != 1:
        return False
    n = arrays["token_ids"].shape[0]
    return all(array.shape == ((n, 2) if name == "offsets" else (n,))
               and array.dtype.kind == ("f" if name in FLOAT_FIELDS else "i") for name, array in arrays.items())

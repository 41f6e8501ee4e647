"""The evidence record of a run on a chat API (METHODS-API.md §24): every HTTP attempt, stored before its answer is
used, append-only and hash-chained, in the results store.

Each record holds the exact request bytes (no credential is ever in them), the exact response bytes, the status,
send and receive times (UTC, ms), and a summary read from the bytes (`blackbox.call_summary`). Its hash covers all of
that through the SHA-256 of each body, and the previous record's hash; the first record's "previous hash" is the hash
of the run's manifest, so the head hash — kept on the run's row and cited by the report — vouches for the manifest and
every exchange. `verify_chain` re-walks it and names the first record that does not match.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterator

import pandas as pd

from ..model.chat.client import Exchange
from .store import ResultsStore
from .store_db import transaction

#: Records read at once when a run's record is walked (each holds two bodies: a few KB to a few MB).
READ_CHUNK = 500


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical(value: object) -> bytes:
    """The bytes a hash is taken of: JSON with sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def manifest_hash(manifest: dict) -> str:
    """The hash the chain starts from: the run manifest's."""
    return sha256(canonical(manifest))


def utc_ms(seconds: float) -> str:
    """"2026-11-28T12:00:00.123Z" for seconds since the epoch."""
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass(frozen=True)
class CallRecord:
    """One stored exchange, as the record holds it."""

    run_id: str
    seq: int
    unit: str
    step: int
    attempt: int
    call_id: str
    parent_call_id: str | None
    sent_at: str
    received_at: str
    url: str
    request: bytes
    status: int | None
    response: bytes
    failure: str | None
    summary: dict
    prev_hash: str
    hash: str

    def hashed_fields(self) -> dict:
        """What the record's hash covers: every field, the bodies by their SHA-256."""
        return {"run_id": self.run_id, "seq": self.seq, "unit": self.unit, "step": self.step, "attempt": self.attempt,
                "call_id": self.call_id, "parent_call_id": self.parent_call_id, "sent_at": self.sent_at,
                "received_at": self.received_at, "url": self.url, "request_sha256": sha256(self.request),
                "status": self.status, "response_sha256": sha256(self.response), "failure": self.failure,
                "summary": self.summary, "prev_hash": self.prev_hash}


def record_hash(record: CallRecord) -> str:
    return sha256(canonical(record.hashed_fields()))


COLUMNS = ["run_id", "seq", "unit", "step", "attempt", "call_id", "parent_call_id", "sent_at", "received_at", "url",
           "request", "request_sha256", "status", "response", "response_sha256", "failure", "summary", "prev_hash",
           "hash"]


class EvidenceRecord:
    """The record of one run in a results store: append an exchange, read what is stored."""

    def __init__(self, store: ResultsStore, run_id: str):
        self.store, self.run_id = store, run_id

    def append(self, unit: str, step: int, exchange: Exchange, summary: dict) -> CallRecord:
        """Store one exchange as the next record of the chain (one transaction: the record and the run's head hash)."""
        with self.store._connect() as con:
            with transaction(con):
                last = con.execute("SELECT seq, hash FROM api_calls WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                                   [self.run_id]).fetchone()
                if last is None:
                    config = con.execute("SELECT config FROM runs WHERE run_id = ?", [self.run_id]).fetchone()
                    if config is None:
                        raise KeyError(f"no run {self.run_id!r} in {self.store.path}")
                    seq, prev = 0, manifest_hash(json.loads(config[0]))
                else:
                    seq, prev = last[0] + 1, last[1]
                call_id = f"{unit}/{step}/{exchange.attempt}"
                parent = f"{unit}/{step}/{exchange.attempt - 1}" if exchange.attempt else None
                record = CallRecord(self.run_id, seq, unit, step, exchange.attempt, call_id, parent,
                                    utc_ms(exchange.sent_at), utc_ms(exchange.received_at), exchange.url,
                                    exchange.request, exchange.status, exchange.response, exchange.failure, summary,
                                    prev, "")
                digest = record_hash(record)
                con.execute(f"INSERT INTO api_calls ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                            [self.run_id, seq, unit, step, exchange.attempt, call_id, parent, record.sent_at,
                             record.received_at, exchange.url, exchange.request, sha256(exchange.request),
                             exchange.status, exchange.response, sha256(exchange.response), exchange.failure,
                             json.dumps(summary, sort_keys=True), prev, digest])
                con.execute("UPDATE runs SET head_hash = ? WHERE run_id = ?", [digest, self.run_id])
        return CallRecord(**{**record.__dict__, "hash": digest})

    def head(self) -> str | None:
        """The run's head hash as its row holds it (None before the first record)."""
        with self.store._connect() as con:
            row = con.execute("SELECT head_hash FROM runs WHERE run_id = ?", [self.run_id]).fetchone()
        return row[0] if row else None

    def usage_totals(self) -> tuple[int, int, int]:
        """(answered requests, input tokens, output tokens) of the run so far, as the API's `usage` counted them (a
        sum in the store: a page polls it while the run goes on)."""
        with self.store._connect() as con:
            row = con.execute("""SELECT count(*), sum(CAST(json_extract(summary, '$.usage.input_tokens') AS BIGINT)),
                                        sum(CAST(json_extract(summary, '$.usage.output_tokens') AS BIGINT))
                                 FROM api_calls WHERE run_id = ? AND json_extract(summary, '$.usage') IS NOT NULL""",
                              [self.run_id]).fetchone()
        return int(row[0]), int(row[1] or 0), int(row[2] or 0)

    def unit_records(self, unit: str) -> list[CallRecord]:
        """The records of one unit (a book's conversation), in the order they were stored."""
        with self.store._connect() as con:
            frame = con.execute(f"SELECT {', '.join(COLUMNS)} FROM api_calls WHERE run_id = ? AND unit = ? ORDER BY seq",
                                [self.run_id, unit]).df()
        return [_record(row) for row in frame.itertuples(index=False)]

    def records(self) -> Iterator[CallRecord]:
        """Every record of the run in chain order, read `READ_CHUNK` at a time."""
        start = 0
        while True:
            with self.store._connect() as con:
                frame = con.execute(f"SELECT {', '.join(COLUMNS)} FROM api_calls WHERE run_id = ? AND seq >= ? "
                                    "ORDER BY seq LIMIT ?", [self.run_id, start, READ_CHUNK]).df()
            if frame.empty:
                return
            for row in frame.itertuples(index=False):
                yield _record(row)
            start = int(frame["seq"].iloc[-1]) + 1


def _record(row) -> CallRecord:
    return CallRecord(row.run_id, int(row.seq), row.unit, int(row.step), int(row.attempt), row.call_id,
                      row.parent_call_id if isinstance(row.parent_call_id, str) else None, row.sent_at,
                      row.received_at, row.url, bytes(row.request), None if pd.isna(row.status) else int(row.status),
                      bytes(row.response), row.failure if isinstance(row.failure, str) else None,
                      json.loads(row.summary), row.prev_hash, row.hash)


@dataclass(frozen=True)
class ChainCheck:
    """The result of re-walking a run's record: how many records, the head hash, and the first fault (None: none)."""

    n_records: int
    head: str
    fault: str | None


def verify_chain(records: Iterator[CallRecord], manifest: dict, stored_head: str | None,
                 summarize=None) -> ChainCheck:
    """Re-walk the chain from the manifest's hash: each record's body hashes, its link to the previous record, its own
    hash, and (given `summarize(status, response) -> dict`) its summary recomputed from its bytes; then the head the
    run's row holds. The first mismatch is named by its call id and sequence number."""
    prev, n = manifest_hash(manifest), 0
    for record in records:
        where = f"record {record.seq} ({record.call_id})"
        if record.seq != n:
            return ChainCheck(n, prev, f"{where}: a record is missing before it (expected number {n})")
        if record.prev_hash != prev:
            what = "the run's manifest was altered" if n == 0 else "it does not follow the record before it"
            return ChainCheck(n, prev, f"{where}: {what}")
        if summarize is not None and summarize(record.status, record.response) != record.summary:
            return ChainCheck(n, prev, f"{where}: its summary differs from what its response bytes say")
        if record_hash(record) != record.hash:
            return ChainCheck(n, prev, f"{where}: its content was altered after it was stored (its hash differs)")
        prev, n = record.hash, n + 1
    if stored_head != (prev if n else None):
        return ChainCheck(n, prev, f"the run's head hash {stored_head} is not the last record's {prev}: records were "
                                   "removed or added")
    return ChainCheck(n, prev, None)

"""`mia verify RUN`: re-walk a chat API run's evidence record and recompute every derived number from the stored
answers alone (METHODS-API.md §24), with no network: the chain from the manifest's hash to the head the run's row
holds, each record's summary from its bytes, each text against its SHA-256 in the manifest, and each text's result by
replaying its conversation from the record."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import partial

from ..blackbox.call_summary import call_summary, read_answer
from ..blackbox.two_phase import Conversation, ExtractionSettings, converse
from ..model.chat.answers import ChatAnswer
from ..runs.evidence import EvidenceRecord, verify_chain
from ..runs.store import ResultsStore
from ..model.chat.client import request_bytes
from ..runs.api_results import run_texts, stored_results
from .api_extraction import stored_answer
from .api_procedures import PROCEDURES, RUN_KINDS


@dataclass(frozen=True)
class Verification:
    """The outcome: records walked, the head hash, results compared, and the first fault (None: verified)."""

    run_id: str
    n_records: int
    head: str
    n_results: int
    fault: str | None

    def words(self) -> str:
        if self.fault is None:
            return (f"verified: {self.n_records:,} records, head {self.head}, results identical "
                    f"({self.n_results} texts recomputed from the stored answers)")
        return f"not verified: {self.fault}"


def replay(store: ResultsStore, run_id: str) -> dict[str, dict]:
    """Each finished text's result, derived again from the record alone (steps without a stored answer are the
    HTTP failures the run halted on)."""
    manifest = store.run(run_id)["config"]
    procedure = PROCEDURES[manifest["method"]]
    settings = procedure.settings(**manifest["settings"])
    done = stored_results(store, run_id)
    return {row.unit: procedure.run(row.text, manifest["model"], manifest["api"], settings,
                                    replay_send(store, run_id, manifest["api"], row.unit), lambda s: None)
            for row in run_texts(store, run_id).itertuples(index=False) if row.unit in done}


def replay_send(store: ResultsStore, run_id: str, api: str, unit: str):
    """`send` for one text that answers from its stored records only (None where no answer was stored)."""
    answered = {r.step: r for r in EvidenceRecord(store, run_id).unit_records(unit)
                if read_answer(r.status, r.response, api) is not None}

    def send(step: int, body: dict) -> ChatAnswer | None:
        record = answered.get(step)
        return None if record is None else stored_answer(record, request_bytes(body), api)

    return send


def replay_conversation(store: ResultsStore, run_id: str, manifest: dict, unit: str, text: str) -> Conversation:
    """One text's conversation as its stored answers make it (for its result, and for the page's diff view)."""
    return converse(text, manifest["model"], manifest["api"], ExtractionSettings(**manifest["settings"]),
                    replay_send(store, run_id, manifest["api"], unit))


def verify_run(store: ResultsStore, run_id: str) -> Verification:
    """Check a run's record and results; the first fault found is named (which record, which text)."""
    run = store.run(run_id)
    if run["kind"] not in RUN_KINDS:
        raise ValueError(f"run {run_id!r} is a {run['kind']} run: only chat API runs have an evidence record to verify")
    manifest = run["config"]
    evidence = EvidenceRecord(store, run_id)
    summarize = partial(_summary, api=manifest["api"], scope=manifest["settings"].get("refusal_scope", "all"))
    chain = verify_chain(evidence.records(), manifest, evidence.head(), summarize)
    if chain.fault is not None:
        return Verification(run_id, chain.n_records, chain.head, 0, chain.fault)
    texts = run_texts(store, run_id)
    hashes = {t["unit"]: t["sha256"] for t in manifest["texts"]}
    for row in texts.itertuples(index=False):
        if hashlib.sha256(row.text.encode("utf-8")).hexdigest() != hashes.get(row.unit):
            return Verification(run_id, chain.n_records, chain.head, 0,
                                f"the stored text of {row.unit} ({row.name}) is not the one the manifest names")
    stored = stored_results(store, run_id)
    try:
        again = replay(store, run_id)
    except ValueError as err:  # a stored request that is not the one the replay builds
        return Verification(run_id, chain.n_records, chain.head, 0, str(err))
    for unit, result in again.items():
        if result != stored[unit]:
            changed = sorted(k for k in result if result.get(k) != stored[unit].get(k))
            return Verification(run_id, chain.n_records, chain.head, len(again),
                                f"the stored result of {unit} differs from its recomputation ({', '.join(changed[:5])})")
    return Verification(run_id, chain.n_records, chain.head, len(again), None)


def _summary(status: int | None, response: bytes, *, api: str, scope: str) -> dict:
    """A record's summary as stored: JSON round-trip of `call_summary` (tuples become lists, as in the store)."""
    return json.loads(json.dumps(call_summary(status, response, api, refusal_scope=scope), sort_keys=True))

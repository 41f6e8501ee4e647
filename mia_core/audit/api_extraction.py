"""A book-extraction run on a chat API (METHODS-API.md §17, §24): each book and each negative-control text through the
two phases, every attempt stored before it is used, each text's numbers derived from the stored answers alone.

A run lives in the results store: its manifest (what decides the requests, the texts' SHA-256, the price table, the
operator, the environment) on its row, the texts as its snippets, the evidence record (`runs.evidence`) and one result
per text. Killed, it resumes from the last stored answer and sends nothing whose answer is stored; stopped by its
budget, it resumes when run again with a larger one. `replay` derives every result from the record without a network,
which is what `mia verify` compares.
"""
from __future__ import annotations

import getpass
import hashlib
import json
import platform
import sys
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from typing import Callable, Sequence

import pandas as pd

from ..blackbox.call_summary import call_summary, read_answer
from ..blackbox.normalize import NORMALIZATION_VERSION
from ..model.chat.answers import ChatAnswer, parse_answer
from ..model.chat.chat_model import ChatModel
from ..model.chat.client import ChatGaveUp, Exchange, request_bytes
from ..model.chat.prices import Budget, BudgetReached, Meter, Prices, Spent
from ..runs.api_results import claim_unit, keep_claim, release_unit, results_table, store_result, stored_results
from ..runs.evidence import CallRecord, EvidenceRecord
from ..runs.store import ResultsStore, RunRecord
from ..version import code_version
from .api_procedures import METHOD_VERSION, PROCEDURES, Settings, procedure_for, scope_of



#: Seconds between renewals of a session's claims while it records answers (a claim goes stale after an hour; renewing
#: on every answer cost a store connection, ~30 ms, per request).
CLAIM_RENEW_S = 30.0


class RecordMismatch(ValueError):
    """A stored request differs from the one the run would send now: the record is not this run's to resume."""


@dataclass(frozen=True)
class Text:
    """One text to extract: a book audited, or a negative control (a text the model cannot have seen)."""

    name: str
    text: str
    role: str  # "book" or "control"
    source: str = ""

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def unit_ids(texts: Sequence[Text]) -> list[str]:
    """Stable ids of the run's texts, in order: "book-000", "control-000", … (names can be anything; ids are plain)."""
    counts: Counter = Counter()
    out = []
    for text in texts:
        out.append(f"{text.role}-{counts[text.role]:03d}")
        counts[text.role] += 1
    return out


def run_plan(model: ChatModel, texts: Sequence[Text], settings: Settings) -> dict:
    """What decides the run's requests (a resumed run must have the same): the API spec, settings, the texts."""
    return {"method": procedure_for(settings).method, "method_version": METHOD_VERSION, "spec": model.spec, "api": model.chat.api,
            "model": model.chat.model, "settings": asdict(settings), "normalization": NORMALIZATION_VERSION,
            "texts": [{"unit": u, "name": t.name, "role": t.role, "sha256": t.sha256, "source": t.source}
                      for u, t in zip(unit_ids(texts), texts)]}


def run_manifest(plan: dict, model: ChatModel, operator: str | None) -> dict:
    """The plan with what the record must also say (§24 "Run manifest"): tool version, tier, prices, operator,
    when the run started, the environment; fixed when the run is created (its hash starts the chain)."""
    return {**plan, "tool_version": code_version(), "tier": model.tier.name, "k_top": model.tier.k_top,
            "answered_model": model.answered_model, "prices": model.prices.words(),
            "price_date": model.prices.date, "operator": operator or getpass.getuser(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "jailbreak": False,
            "environment": {"python": sys.version.split()[0], "platform": platform.platform()}}


def default_run_id(plan: dict) -> str:
    return PROCEDURES[plan["method"]].kind + "-" + hashlib.sha256(json.dumps(plan, sort_keys=True).encode()).hexdigest()[:12]


@dataclass
class Outcome:
    """How a run ended ("done", "budget": stopped before a request that could pass it), its results, what it spent."""

    run_id: str
    status: str
    message: str
    results: pd.DataFrame
    spent: Spent
    head: str | None


class ApiExtractionRun:
    """One run: plan it in the store (or find it), then extract each text not yet done."""

    def __init__(self, model: ChatModel, store: ResultsStore, texts: Sequence[Text], settings: Settings, *,
                 budget: Budget = Budget(), run_id: str | None = None, operator: str | None = None,
                 wait: Callable[[float], None] = time.sleep):
        self.procedure = procedure_for(settings)
        controls = sum(t.role == "control" for t in texts)
        if self.procedure.needs_control and controls < self.procedure.min_controls:
            raise ValueError(f"this {self.procedure.method} run needs {control_words(self.procedure.min_controls)}: "
                             "texts the model cannot have seen (e.g. published after its training cutoff), run the "
                             "same way, so that the report can show what the method finds where there is nothing to "
                             f"find (given: {controls})")
        self.model, self.store, self.texts, self.settings = model, store, list(texts), settings
        self.plan = run_plan(model, texts, settings)
        self.run_id = run_id or default_run_id(self.plan)
        self.units = unit_ids(texts)
        self.evidence = EvidenceRecord(store, self.run_id)
        self.budget, self.wait = budget, wait
        self._renewed = time.monotonic()
        manifest = run_manifest(self.plan, model, operator)
        record = RunRecord(self.run_id, self.procedure.kind, model.spec, model.fingerprint, self.procedure.method,
                           asdict(settings), 0,
                           code_version(), "api", manifest)
        snippets = pd.DataFrame([[u, t.name, t.role, None, n, len(t.text.split()), t.text]
                                 for n, (u, t) in enumerate(zip(self.units, texts))],
                                columns=["snippet_id", "book", "role", "label", "position", "n_words", "text"])
        if store.plan_run(record, self.plan, snippets, []):
            for n, exchange in enumerate(model.probe_exchanges):  # how the tier was learnt: the record's first calls
                self.evidence.append("probe", n, exchange, call_summary(exchange.status, exchange.response,
                                                                         model.chat.api,
                                                                         refusal_scope=scope_of(settings)))
        self.meter = Meter(model.prices, budget, spent_in(self.evidence, model.prices))

    def run(self, progress: Callable[[str, int, int], None] = lambda name, done, total: None) -> Outcome:
        """Extract every text without a stored result, `concurrency` texts at once (each conversation in order), each
        claimed first so that another process on the same run takes others; stop cleanly at the budget."""
        session = uuid.uuid4().hex
        done = set(stored_results(self.store, self.run_id))
        todo = [(u, t) for u, t in zip(self.units, self.texts) if u not in done]
        stops: list[str] = []
        finished = len(done)
        progress("", finished, len(self.texts))
        with ThreadPoolExecutor(self.model.chat.concurrency, thread_name_prefix="api-extraction") as pool:
            futures = {pool.submit(self._extract, session, unit, text, stops): text for unit, text in todo}
            for future in as_completed(futures):
                future.result()
                finished += 1
                progress(futures[future].name, finished, len(self.texts))
        left = len(self.texts) - len(stored_results(self.store, self.run_id))
        status = "budget" if stops else "done" if left == 0 else "partial"
        message = stops[0] if stops else "" if left == 0 else f"{left} texts are being extracted by another process"
        self.store.set_status(self.run_id, "done" if status == "done" else "stopped", message)
        return Outcome(self.run_id, status, message, results_table(self.store, self.run_id), self.meter.spent,
                       self.evidence.head())

    def _extract(self, session: str, unit: str, text: Text, stops: list[str]) -> None:
        """One text's two phases and result, under this session's claim (skipped when it cannot claim it, or once the
        budget stopped the run)."""
        if stops or not claim_unit(self.store, self.run_id, session, unit):
            return
        try:
            result = self.procedure.run(text.text, self.model.chat.model, self.model.chat.api, self.settings,
                                        self._live_send(unit, session), self.wait)
            store_result(self.store, self.run_id, unit, result)
        except BudgetStop as stop:
            stops.append(str(stop))
        finally:
            release_unit(self.store, self.run_id, session, unit)

    def _live_send(self, unit: str, session: str):
        """`send` for one text: the stored answer of a step if there is one (its request checked byte for byte),
        else the API's, each attempt recorded first."""
        api = self.model.chat.api
        records = self.evidence.unit_records(unit)
        answered = {r.step: r for r in records if read_answer(r.status, r.response, api) is not None}
        attempts = Counter(r.step for r in records)

        def send(step: int, body: dict) -> ChatAnswer | None:
            data = request_bytes(body)
            if step in answered:
                return stored_answer(answered[step], data, api)
            bound = input_bound(body)
            try:
                held = self.meter.reserve(bound, int(body.get("max_tokens", 0)))
            except BudgetReached as err:
                raise BudgetStop(str(err)) from None

            def record(exchange: Exchange) -> None:
                exchange = replace(exchange, attempt=exchange.attempt + attempts[step])
                self.evidence.append(unit, step, exchange, call_summary(exchange.status, exchange.response, api,
                                                                        refusal_scope=scope_of(self.settings)))
                if time.monotonic() - self._renewed > CLAIM_RENEW_S:
                    self._renewed = time.monotonic()
                    keep_claim(self.store, self.run_id, session)

            try:
                answer = self.model.client.send(body, record, token_bound=bound + int(body.get("max_tokens", 0)))
            except ChatGaveUp:
                self.meter.release(held)
                return None
            except BaseException:
                self.meter.release(held)
                raise
            self.meter.settle(held, answer.input_tokens or 0, answer.output_tokens or 0)
            return answer

        return send


def control_words(n: int) -> str:
    return "a negative control" if n == 1 else f"at least {n} clean books (negative controls)"


class BudgetStop(Exception):
    """The run's budget is reached before a request (the run stops; run it again with a larger budget)."""


def stored_answer(record: CallRecord, data: bytes, api: str) -> ChatAnswer:
    """A stored step's answer, after checking that its stored request is the one this run would send."""
    if record.request != data:
        raise RecordMismatch(f"the stored request of {record.call_id} differs from the one this run would send: the "
                             "record is not this run's (its settings or texts changed); start a new run")
    return parse_answer(record.response, api)


def input_bound(body: dict) -> int:
    """At most how many input tokens a request is: its texts' UTF-8 bytes (a byte-level tokenizer never makes more
    tokens than bytes) plus a few per message for the chat template. A bound for the budget check, not a count."""
    texts = [m.get("content", "") for m in body.get("messages", [])] + [body.get("prompt", "")]
    return sum(len(str(t).encode("utf-8")) + 8 for t in texts) + 16


def spent_in(evidence: EvidenceRecord, prices: Prices) -> Spent:
    """What the run's stored answers spent (their `usage`): a resumed run's budget counts it."""
    requests, input_tokens, output_tokens = evidence.usage_totals()
    return Spent(requests, input_tokens, output_tokens, prices.cost(input_tokens, output_tokens))

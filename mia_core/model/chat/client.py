"""Requests to a chat API, each attempt handed to the evidence record before its answer is used.

One request is sent as exact bytes (the JSON body, as stored); each attempt — retries included — becomes an
`Exchange` (request bytes, response bytes, status, send and receive times) given to the caller's `record` first, then
read. Overload (429, honouring Retry-After), server errors (5xx), dropped connections and a passed deadline are retried
1 s, 2 s, 4 s … apart (METHODS-API.md "Calls": at most 5 tries by default, ours); a refused key, an unknown model or a
malformed request is one sentence at once. The API key is read from the spec's `key_env` variable for each request
and is never part of an exchange.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Callable

import requests
from urllib3.exceptions import HTTPError, ReadTimeoutError

from ..served.http import Client, ServedError, error_message, retry_after
from .answers import AnswerError, ChatAnswer, parse_answer
from .rate import RateLimit
from .spec import ChatSpec

#: Answers worth trying again: overloaded (429) or a server-side failure that may pass.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: First pause between tries in seconds, doubled each time (a Retry-After header wins), capped at `BACKOFF_CAP_S`.
BACKOFF_S = 1.0
BACKOFF_CAP_S = 60.0
#: Largest answer read from a chat API (bytes): a long answer with 20 log-probs per token is well under it.
MAX_CHAT_ANSWER_BYTES = 32 << 20


class ChatError(ServedError):
    """A chat API that cannot be used or did not answer usably, phrased for the user."""


class ChatGaveUp(ChatError):
    """No try gave an answer (overloaded, server errors, dropped connections, the deadline): the paper's "HTTP error"
    that halts a conversation, unlike a refused key or request, which stops the run."""


@dataclass(frozen=True)
class Exchange:
    """One HTTP attempt as sent and as received: what the evidence record stores (no credential is in it)."""

    attempt: int
    url: str
    request: bytes
    sent_at: float
    """Seconds since the epoch (UTC) when the request left."""
    received_at: float
    status: int | None
    """The HTTP status (None: no answer — the deadline passed or the connection dropped; `failure` says which)."""
    response: bytes
    failure: str | None = None


Record = Callable[[Exchange], None]


def request_bytes(body: dict) -> bytes:
    """The exact bytes sent for a JSON body (compact, UTF-8, keys in the body's order): what the record stores."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _Http(Client):
    """The served client's deadline and streamed size bound, with a chat API's bound and words."""

    def answer_bound(self) -> int:
        return MAX_CHAT_ANSWER_BYTES

    def _too_large(self, path: str) -> ChatError:
        return ChatError(f"the API at {self.spec.base_url} answered {path} with more than "
                         f"{MAX_CHAT_ANSWER_BYTES / 2**20:g} MB: no chat answer is that large; is the URL right?")


class ChatClient:
    """Sends requests to one chat API under its rate limits, recording every attempt."""

    def __init__(self, spec: ChatSpec, *, sleep: Callable[[float], bool] | None = None):
        self.spec = spec
        self._http = _Http(spec)  # type: ignore[arg-type]  (a ChatSpec has every field the client reads)
        self.rate = RateLimit(spec.rpm, spec.tpm)
        #: Set to stop: no further request or retry is sent.
        self.cancelled = threading.Event()
        self._sleep = sleep or self.cancelled.wait

    def send(self, body: dict, record: Record, *, token_bound: int) -> ChatAnswer:
        """The parsed answer to `body`, every attempt recorded before it is read; a `ChatError` when no try succeeds
        or the API refuses. `token_bound` (input + output tokens at most) is what the rate limit reserves."""
        data = request_bytes(body)
        url = self._http.url(self.spec.endpoint)
        for attempt in range(self.spec.retries + 1):
            if self.cancelled.is_set():
                raise ChatError("cancelled")
            slot = self.rate.wait(token_bound, self.cancelled)
            exchange, answer, fatal = self._attempt(attempt, url, data)
            record(exchange)
            if fatal is not None:
                raise fatal
            last = attempt == self.spec.retries
            if exchange.status == 200:
                try:
                    parsed = parse_answer(exchange.response, self.spec.api)
                except AnswerError as err:
                    raise ChatError(f"the API at {self.spec.base_url} answered in a shape MIA Lens cannot read: {err}") \
                        from None
                self.rate.settle(slot, (parsed.input_tokens or 0) + (parsed.output_tokens or 0))
                return parsed
            if exchange.status is not None and exchange.status not in RETRY_STATUS:
                raise self._refusal(exchange)
            if last:
                raise ChatGaveUp(self._gave_up(exchange, attempt + 1))
            wait = (retry_after(answer) if answer is not None else None) or BACKOFF_S * 2**attempt
            if self._sleep(min(wait, BACKOFF_CAP_S)):
                raise ChatError("cancelled")
        raise AssertionError("unreachable")  # the loop returns or raises on its last try

    def _attempt(self, attempt: int, url: str, data: bytes) -> tuple[Exchange, requests.Response | None,
                                                                      ServedError | None]:
        """One try: its exchange, the HTTP answer (None when there was none), and an error no retry can mend (an
        answer over the size bound, an unset key)."""
        sent = time.time()
        try:
            answer, content = self._http.attempt(self.spec.endpoint, data)
        except (requests.Timeout, ReadTimeoutError):
            return Exchange(attempt, url, data, sent, time.time(), None, b"",
                            f"no answer within the {self.spec.timeout:g} s deadline"), None, None
        except (requests.ConnectionError, HTTPError):
            return Exchange(attempt, url, data, sent, time.time(), None, b"", "connection refused or dropped"), \
                None, None
        except ServedError as err:
            return Exchange(attempt, url, data, sent, time.time(), None, b"", str(err)), None, err
        return Exchange(attempt, url, data, sent, time.time(), answer.status_code, content), answer, None

    def _refusal(self, exchange: Exchange) -> ChatError:
        """The sentence for an answer that no retry will change (401/403, 404, 400 …)."""
        where = f"the API at {self.spec.base_url}"
        if exchange.status in (401, 403):
            how = (f"check the key in {self.spec.key_env}" if self.spec.key_env
                   else "name the environment variable that holds the key with key_env=NAME in the spec")
            return ChatError(f"{where} refused the request (HTTP {exchange.status}): {how}")
        try:
            said = error_message(json.loads(exchange.response))
        except (ValueError, RecursionError):
            said = " ".join(exchange.response[:200].decode("utf-8", errors="replace").split())
        hint = " (is model= the provider's name for it?)" if exchange.status == 404 else ""
        return ChatError(f"{where} refused the request (HTTP {exchange.status}){hint}: {said}")

    def _gave_up(self, exchange: Exchange, tries: int) -> str:
        what = exchange.failure or f"HTTP {exchange.status}"
        return (f"the API at {self.spec.base_url} did not answer usably in {tries} tries (last: {what}): try again "
                "later; the run resumes where it stopped")

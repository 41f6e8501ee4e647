"""JSON over HTTP to a model server: a deadline per request, a bound on an answer's size, retries with backoff on
overload and server errors, and every failure as one sentence that says what happened and what to do (never a
traceback).

`timeout=` of the spec is a deadline for each request's whole answer, not for each socket read: a server that sends
one byte at a time is cut off when the deadline passes (the body is read as it arrives, and each read waits at most
until the deadline). Only the status line and headers are read by `requests` under a per-read timeout; the body,
where an answer's megabytes are, is read here. The body is also counted as it arrives and dropped at
`MAX_ANSWER_BYTES` (before reading any of it when its Content-Length says more)."""
from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import requests
from urllib3.exceptions import HTTPError, ReadTimeoutError

from ..errors import ModelLoadError
from .spec import ServedSpec
#: Answers worth trying again: overloaded (429) or a server-side failure that may pass.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: First backoff in seconds (doubled on each retry, capped at `BACKOFF_CAP_S`; a Retry-After header wins).
BACKOFF_S = 0.5
BACKOFF_CAP_S = 30.0
#: Largest answer read (bytes): a full-vocabulary answer is ~4 MB per position (docs/security.md, "Bounds").
MAX_ANSWER_BYTES = 2 << 30
#: Most bytes taken from the socket at once while an answer's body streams in (each read returns what has arrived).
CHUNK_BYTES = 1 << 20


class ServedError(ModelLoadError):
    """A served model that cannot be used or answered wrongly, phrased for the user (a `ModelLoadError`: pages and
    commands that report a model that failed to load report these the same way)."""


class Client:
    """Requests to one server: a session per thread (connection reuse), the spec's timeout and retries."""

    def __init__(self, spec: ServedSpec):
        self.spec = spec
        self._local = threading.local()
        #: Set to stop waiting between retries (cancellation).
        self.cancelled = threading.Event()

    def url(self, path: str) -> str:
        """The address of an endpoint: under the base URL (`/completions`), or from the server's root (`//tokenize`
        and the like: vLLM serves those beside `/v1`, not under it)."""
        if path.startswith("//"):
            root = self.spec.base_url.rsplit("/v1", 1)[0] if self.spec.base_url.endswith("/v1") else self.spec.base_url
            return root + path[1:]
        return self.spec.base_url + path

    def get(self, path: str) -> Any:
        """GET an endpoint's JSON."""
        return self._send("GET", path, None)

    def post(self, path: str, body: dict) -> Any:
        """POST a JSON body, return the JSON answer."""
        return self._send("POST", path, body)

    def get_text(self, path: str) -> str:
        """GET an endpoint's plain text (vLLM's Prometheus `/metrics`)."""
        return self._send("GET", path, None, text=True)

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.headers["Content-Type"] = "application/json"
        return session

    def _headers(self) -> dict[str, str]:
        if self.spec.key_env is None:
            return {}
        key = os.environ.get(self.spec.key_env)
        if not key:
            raise ServedError(f"the environment variable {self.spec.key_env} (key_env= of the spec) is not set: set it "
                              "to the server's API key")
        return {"Authorization": f"Bearer {key}"}

    def _send(self, method: str, path: str, body: dict | None, *, text: bool = False) -> Any:
        url = self.url(path)
        attempt = 0
        while True:
            if self.cancelled.is_set():  # a cancelled run sends nothing more
                raise ServedError("cancelled")
            wait = None
            try:
                deadline = time.monotonic() + self.spec.timeout
                answer = self._session().request(method, url, json=body, headers=self._headers(), stream=True,
                                                 timeout=(min(10.0, self.spec.timeout), self.spec.timeout))
                if answer.status_code in RETRY_STATUS and attempt < self.spec.retries:
                    answer.close()
                    wait = retry_after(answer) or BACKOFF_S * 2**attempt
                else:
                    return self._read(answer, self._body(answer, path, deadline), path, text)
            except (requests.Timeout, ReadTimeoutError):
                if attempt >= self.spec.retries:
                    raise ServedError(f"the server at {self.spec.base_url} did not answer {path} within "
                                      f"{self.spec.timeout:g} s ({attempt + 1} tries): raise timeout= in the spec, or "
                                      "send shorter texts") from None
                wait = BACKOFF_S * 2**attempt
            except (requests.ConnectionError, HTTPError):  # urllib3's HTTPError: a body broken off as it streams
                if attempt >= self.spec.retries:
                    raise ServedError(f"no server answers at {self.spec.base_url} (connection refused or reset, "
                                      f"{attempt + 1} tries): is it running, and is the URL right?") from None
                wait = BACKOFF_S * 2**attempt
            attempt += 1
            if self.cancelled.wait(min(wait, BACKOFF_CAP_S)):
                raise ServedError("cancelled")

    def attempt(self, path: str, data: bytes) -> tuple[requests.Response, bytes]:
        """One POST of the exact bytes `data`, no retry: the answer and its body, read under the deadline and the size
        bound (requests' and urllib3's exceptions propagate, for the caller to record and retry)."""
        deadline = time.monotonic() + self.spec.timeout
        answer = self._session().request("POST", self.url(path), data=data, headers=self._headers(), stream=True,
                                         timeout=(min(10.0, self.spec.timeout), self.spec.timeout))
        return answer, self._body(answer, path, deadline)

    def _body(self, answer: requests.Response, path: str, deadline: float) -> bytes:
        """An answer's body, read as it arrives: refused above `MAX_ANSWER_BYTES` (at once when its Content-Length
        says so), a `requests.Timeout` once the monotonic `deadline` passes; the connection is dropped on either."""
        try:
            declared = answer.headers.get("Content-Length", "")
            bound = self.answer_bound()
            if declared.strip().isdigit() and int(declared) > bound:
                raise self._too_large(path)
            parts, size = [], 0
            while chunk := _read_some(answer, deadline, self.spec.timeout):
                size += len(chunk)
                if size > bound:
                    raise self._too_large(path)
                parts.append(chunk)
            return b"".join(parts)
        except BaseException:
            answer.close()  # an answer not read to its end cannot go back to the connection pool
            raise

    def answer_bound(self) -> int:
        """The most bytes one answer may have (`MAX_ANSWER_BYTES`: a served model's whole distributions)."""
        return MAX_ANSWER_BYTES

    def _too_large(self, path: str) -> ServedError:
        return ServedError(f"the server at {self.spec.base_url} answered {path} with more than "
                           f"{MAX_ANSWER_BYTES / 2**20:g} MB (MAX_ANSWER_BYTES): ask for fewer log-probs (logprobs=top) or "
                           "shorter texts")

    def _read(self, answer: requests.Response, content: bytes, path: str, text: bool = False) -> Any:
        """The JSON of an answer's `content` (its text if `text`), or the error it carries as one sentence."""
        where = f"the server at {self.spec.base_url}"
        if answer.status_code in (401, 403):
            how = (f"check the key in {self.spec.key_env}" if self.spec.key_env
                   else "name the environment variable that holds the key with key_env=NAME in the spec")
            raise ServedError(f"{where} refused the request ({answer.status_code} {answer.reason}): {how}")
        if text:
            if answer.status_code >= 400:
                raise ServedError(f"{where} refused {path} (HTTP {answer.status_code})")
            return content.decode(answer.encoding or "utf-8", errors="replace")
        try:
            data = json.loads(content)
        except (ValueError, RecursionError):  # JSONDecodeError and undecodable bytes are ValueErrors
            snippet = " ".join(content[:80].decode("utf-8", errors="replace").split())
            raise ServedError(f"{where} answered {path} with something that is not JSON (HTTP {answer.status_code}: "
                              f"{snippet!r}): is the URL an OpenAI-compatible API (usually ending in /v1)?") from None
        if answer.status_code >= 400:
            raise ServedError(f"{where} refused {path} (HTTP {answer.status_code}): {error_message(data)}")
        return data


def _read_some(answer: requests.Response, deadline: float, read_timeout: float) -> bytes:
    """What has arrived of an answer's body (b"" at its end), waiting at most until `deadline` (then a
    `requests.Timeout`)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise requests.Timeout("the request's deadline passed")
    sock = getattr(getattr(answer.raw, "connection", None), "sock", None)
    if sock is not None:  # this read waits no longer than the deadline (urllib3 sets it again for the next request)
        sock.settimeout(min(left, read_timeout))
    return answer.raw.read1(CHUNK_BYTES, decode_content=True)  # requests leaves gzip to whoever reads the raw body


def error_message(data: Any) -> str:
    """The message of an OpenAI-style error body ({"error": {"message": …}} or {"message": …}), else the body."""
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return " ".join(inner["message"].split())[:400]
        if isinstance(inner, str):
            return inner[:400]
        if isinstance(data.get("detail"), str):
            return data["detail"][:400]
    return " ".join(json.dumps(data)[:400].split())


def retry_after(answer: requests.Response) -> float | None:
    """Seconds a Retry-After header asks for (numbers only)."""
    try:
        return max(0.0, float(answer.headers.get("Retry-After", "")))
    except ValueError:
        return None


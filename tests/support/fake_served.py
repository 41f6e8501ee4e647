"""A small OpenAI-compatible server on loopback that answers as vLLM does for a made-up model — or lies as a test
tells it to: impossible log-probs, rows too many, values of the wrong type, a body dripped a byte at a time, a body
larger than it should be.

It serves `/v1/models` (one model, `model_len` tokens of context, its tokenizer's folder as the root), `/tokenize`
(the tokenizer's own ids) and `/v1/completions` with `prompt_logprobs` (the true token, its rank, and the top k, or
every token for k = -1) from a fixed distribution per position (float64 log-softmax of made-up logits).

    with FakeServed(tokenizer) as server:
        server.lie = lambda answer, ids: ...      # the answer to send instead of the honest one
        server.write = drip(0.5)                   # how the body goes out (default: whole, with Content-Length)
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import numpy as np

Writer = Callable[["Handler", bytes], None]


def honest_logprobs(ids: list[int], j: int, vocab: int) -> np.ndarray:
    """The made-up model's log-probs of every token at position `j` (given `ids[:j]`), float64, summing to 1."""
    z = 3.0 * np.sin(0.7 * ids[j - 1] + 1.3 * np.arange(vocab) + 0.1 * j)
    return z - (z.max() + np.log(np.exp(z - z.max()).sum()))


def honest_answer(ids: list[int], k: int, vocab: int) -> dict:
    """vLLM's answer to `prompt_logprobs: k` for the prompt `ids`, from `honest_logprobs` at each position."""
    logp = np.vstack([np.zeros(vocab)] + [honest_logprobs(ids, j, vocab) for j in range(1, len(ids))])
    return vllm_answer(ids, logp, k)


def vllm_answer(ids: list[int], logp: np.ndarray, k: int) -> dict:
    """vLLM's answer to `prompt_logprobs: k` for the prompt `ids` whose position j has the log-probs `logp[j]`: row 0
    None, then per position the prompt's token (with its 1-based rank) and the top k (every token for k = -1), keyed
    by token id strings."""
    rows: list[Any] = [None]
    for j in range(1, len(ids)):
        order = np.argsort(-logp[j], kind="stable")
        row = {str(ids[j]): {"logprob": float(logp[j][ids[j]]), "rank": int((logp[j] > logp[j][ids[j]]).sum()) + 1,
                             "decoded_token": "x"}}
        for r, v in enumerate(order if k == -1 else order[:k]):
            row.setdefault(str(int(v)), {"logprob": float(logp[j][v]), "rank": r + 1, "decoded_token": "y"})
        rows.append(row)
    return {"id": "cmpl-fake", "object": "text_completion", "model": "fake",
            "choices": [{"index": 0, "text": "\n", "prompt_logprobs": rows, "finish_reason": "length"}]}


def whole(handler: "Handler", data: bytes) -> None:
    """The body at once, with its Content-Length (as vLLM sends it)."""
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.send_body(data)


def drip(interval_s: float, *, bytes_each: int = 1) -> Writer:
    """The body `bytes_each` bytes every `interval_s` seconds, under its true Content-Length."""
    def write(handler: Handler, data: bytes) -> None:
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        for start in range(0, len(data), bytes_each):
            handler.send_body(data[start:start + bytes_each])
            time.sleep(interval_s)
    return write


def chunked(size: int, *, pad_to: int, pause_s: float = 0.002, declare: bool = False) -> Writer:
    """The body padded with spaces to `pad_to` bytes (still valid JSON), in pieces of `size` bytes with a pause
    between them: as HTTP chunks, or under a Content-Length that says the whole size (`declare`)."""
    def write(handler: Handler, data: bytes) -> None:
        body = data + b" " * max(0, pad_to - len(data))
        if declare:
            handler.send_header("Content-Length", str(len(body)))
        else:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for start in range(0, len(body), size):
            piece = body[start:start + size]
            handler.send_body(piece if declare else b"%x\r\n%s\r\n" % (len(piece), piece))
            time.sleep(pause_s)
        if not declare:
            handler.send_body(b"0\r\n\r\n")
    return write


class Handler(BaseHTTPRequestHandler):
    """Routes the three endpoints; the server holds the model, the lie and the body writer."""

    protocol_version = "HTTP/1.1"
    server: "_Server"

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if self.path == "/v1/models":
            fake = self.server.fake
            self.answer({"object": "list", "data": [{"id": fake.name, "object": "model", "root": fake.root,
                                                     "owned_by": "vllm", "max_model_len": fake.model_len}]})
        else:
            self.answer({"error": {"message": f"no {self.path}"}}, 404)

    def do_POST(self) -> None:  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        fake = self.server.fake
        if self.path == "/tokenize":
            self.answer({"tokens": fake.tokenizer(request["prompt"], add_special_tokens=True)["input_ids"]})
        elif self.path == "/v1/completions":
            fake.requests.append(request)
            ids = [int(i) for i in request["prompt"]]
            answer = honest_answer(ids, int(request.get("prompt_logprobs", 1)), len(fake.tokenizer))
            if fake.lie is not None:
                answer = fake.lie(answer, ids)
            self.answer(answer, write=fake.write)
        else:
            self.answer({"error": {"message": f"no {self.path}"}}, 404)

    def answer(self, data: Any, status: int = 200, write: Writer | None = None) -> None:
        """Send `data` as JSON (NaN and infinities as Python's json writes them), through `write`."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        try:
            (write or whole)(self, json.dumps(data).encode())
        except (BrokenPipeError, ConnectionResetError):  # the client hung up: what it read is counted in `sent`
            self.close_connection = True

    def send_body(self, data: bytes) -> None:
        """Write part of a body, counting what the socket took."""
        self.wfile.write(data)
        self.wfile.flush()
        self.server.fake.sent += len(data)

    def log_message(self, *args) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: "FakeServed"


class FakeServed:
    """The server: `url`, `spec(settings)`, `lie` and `write` to script it, `requests` (completions bodies) and
    `sent` (body bytes the socket took) to see what happened."""

    def __init__(self, tokenizer, *, name: str = "fake", root: str = "fake-root", model_len: int = 128):
        self.tokenizer, self.name, self.root, self.model_len = tokenizer, name, root, model_len
        self.lie: Callable[[dict, list[int]], Any] | None = None
        self.write: Writer = whole
        self.requests: list[dict] = []
        self.sent = 0
        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def spec(self, settings: str = "") -> str:
        """A served-model spec for this server (concurrency given: nothing asks for /metrics)."""
        return f"{self.url}/v1?model={self.name}&concurrency=2" + (f"&{settings}" if settings else "")

    def __enter__(self) -> FakeServed:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

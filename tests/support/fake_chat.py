"""A small OpenAI-compatible chat API on loopback for the faults a real engine will not produce on demand (429 with and
without Retry-After, 500 then recovery, a dropped connection, a non-JSON body, a refused key, an unknown model, a
refusal, an empty answer) and for counting what reaches the server; `first_token` gives answers that ask for log-probs
a first token's top list (a quiz's letters). Its "model" recites one book word by word: asked
to continue a text of the book, it answers the next `max_tokens` words (a word is a token in its `usage`); anything
else gets a fixed sentence. The numbers of the extraction tests come from the real vLLM engine
(`tests/served/test_api_extraction_engine.py`); this server only stands in for faults.

    with FakeChat(book, key="k") as api:
        api.faults = [(429, {"Retry-After": "0"}), (500, {})]   # the next answers, before honest ones
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OTHER = "The weather was mild and nothing at all happened in the town that day."


def continuation(book_words: list[str], text: str, n: int) -> str:
    """The `n` book words after the longest tail of `text` found in the book (≥ 3 words), else `OTHER`."""
    words = text.split()
    for tail in range(min(len(words), 12), 2, -1):
        want = words[-tail:]
        for start in range(len(book_words) - tail + 1):
            if book_words[start:start + tail] == want:
                rest = book_words[start + tail:start + tail + n]
                return " ".join(rest)
    return OTHER


class Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        api = self.server.api
        size = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(size)
        with api.lock:
            api.received.append(body)
            fault = api.faults.pop(0) if api.faults else None
        if api.key and self.headers.get("Authorization") != f"Bearer {api.key}":
            return self._send(401, {"error": {"message": "Incorrect API key provided"}})
        if fault is not None:
            status, headers = fault
            if status == "drop":
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"choices\"")
                self.close_connection = True
                return
            if status == "not-json":
                return self._raw(200, b"<html>gateway</html>")
            return self._send(status, {"error": {"message": f"fault {status}"}}, headers)
        time.sleep(api.delay)
        request = json.loads(body)
        if request.get("model") != api.model:
            return self._send(404, {"error": {"message": f"The model `{request.get('model')}` does not exist"}})
        messages = request.get("messages") or [{"role": "user", "content": request.get("prompt", "")}]
        source = messages[-1]["content"] if messages[-1]["content"] not in api.continue_messages else messages[-2]["content"]
        text = api.reply(source, int(request.get("max_tokens", 16))) if api.reply else continuation(
            api.book_words, source, int(request.get("max_tokens", 16)))
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if api.first_token is not None and request.get("logprobs"):
            top = api.first_token(request)  # token -> log-prob of the first answer token; the answer is its argmax
            text = max(top, key=top.get)
            choice["message"]["content"] = text
            choice["logprobs"] = {"content": [{"token": text, "logprob": top[text], "top_logprobs": [
                {"token": t, "logprob": v} for t, v in list(top.items())[:int(request.get("top_logprobs", 0))]]}]}
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
        answer = {"id": f"chatcmpl-{len(api.received)}", "object": "chat.completion", "created": 1700000000,
                  "model": api.answered_model, "system_fingerprint": "fp_fake",
                  "choices": [choice],
                  "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(text.split()),
                            "total_tokens": prompt_tokens + len(text.split())}}
        self._send(200, answer)

    def _send(self, status: int, data: dict, headers: dict | None = None) -> None:
        self._raw(status, json.dumps(data).encode(), headers)

    def _raw(self, status: int, data: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    api: "FakeChat"


class FakeChat:
    """The server, started on a free loopback port for a `with` block; `.url` is its `/v1` base URL."""

    def __init__(self, book: str, *, model: str = "reciter", key: str | None = None,
                 answered_model: str = "reciter-2026-01-01"):
        self.book_words = book.split()
        self.model, self.key, self.answered_model = model, key, answered_model
        self.faults: list[tuple] = []
        self.received: list[bytes] = []
        self.delay = 0.0  # seconds before each answer
        self.reply = None  # a function (source text, max_tokens) -> answer text, instead of reciting
        self.first_token = None  # a function (request) -> {token: log-prob}: answers asking log-probs get them
        self.continue_messages = {"Continue", "Continue without citation metadata."}
        self.lock = threading.Lock()

    def __enter__(self) -> "FakeChat":
        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.api = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spec(self, **settings) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"api": "chat", "model": self.model, **settings}.items())
        return f"{self.url}?{query}"

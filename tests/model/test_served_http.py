"""The served client against a real HTTP server on loopback that answers as failing servers do: a refused key, an
overloaded server that recovers, an answer that is not JSON, a server that is not there — each one sentence, with
retries only where they can help."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mia_core.model.served.http import Client, ServedError
from mia_core.model.served.spec import parse_served_spec

from tests.support.ports import free_port


class Script(BaseHTTPRequestHandler):
    """Answers each request with the next (status, headers, body) of the server's script (the last one repeats)."""

    def do_POST(self):  # noqa: N802 (the stdlib's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(self.headers.get("Authorization"))
        status, headers, body = self.server.script[min(len(self.server.seen) - 1, len(self.server.script) - 1)]
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Script)
    httpd.script, httpd.seen = [], []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def client(httpd, settings: str = "&retries=3") -> Client:
    return Client(parse_served_spec(f"http://127.0.0.1:{httpd.server_address[1]}/v1?timeout=5{settings}"))


def test_overload_and_server_errors_are_retried_until_an_answer(server):
    server.script = [(429, {"Retry-After": "0"}, {"error": "busy"}), (503, {}, "down"), (200, {}, {"ok": 1})]
    assert client(server).post("/completions", {}) == {"ok": 1}
    assert len(server.seen) == 3


def test_retries_end_with_the_server_s_own_message(server):
    server.script = [(500, {}, {"error": {"message": "engine dead", "code": 500}})]
    with pytest.raises(ServedError, match=r"refused /completions \(HTTP 500\): engine dead"):
        client(server, "&retries=1").post("/completions", {})
    assert len(server.seen) == 2  # the first try and one retry


def test_a_refused_key_is_not_retried_and_says_which_variable(server, monkeypatch):
    server.script = [(401, {}, {"error": "bad key"})]
    monkeypatch.setenv("MIA_TEST_KEY", "sk-test")
    with pytest.raises(ServedError, match="refused the request \\(401 Unauthorized\\): check the key in MIA_TEST_KEY"):
        client(server, "&retries=3&key_env=MIA_TEST_KEY").post("/completions", {})
    assert server.seen == ["Bearer sk-test"]  # sent as a bearer token, once
    monkeypatch.delenv("MIA_TEST_KEY")
    with pytest.raises(ServedError, match="MIA_TEST_KEY .* is not set"):
        client(server, "&retries=3&key_env=MIA_TEST_KEY").post("/completions", {})


def test_an_answer_that_is_not_json(server):
    server.script = [(200, {"Content-Type": "text/html"}, "<html>Welcome to nginx</html>")]
    with pytest.raises(ServedError, match="not JSON .*Welcome to nginx.*ending in /v1"):
        client(server).post("/completions", {})


def test_a_bad_request_is_not_retried(server):
    server.script = [(400, {}, {"error": {"message": "maximum context length is 2048 tokens"}})]
    with pytest.raises(ServedError, match="HTTP 400\\): maximum context length is 2048 tokens"):
        client(server).post("/completions", {})
    assert len(server.seen) == 1


def test_no_server_at_the_address():
    port = free_port()  # nothing listens there, and no other test worker hands it out
    lone = Client(parse_served_spec(f"http://127.0.0.1:{port}/v1?retries=1"))
    with pytest.raises(ServedError, match="no server answers at .* \\(connection refused or reset, 2 tries\\)"):
        lone.get("/models")

"""A served model's default concurrency where the server says nothing of its KV cache: a stdlib HTTP server on
loopback with no /metrics, and one whose /metrics lacks vLLM's cache gauge, give 8 with the reason; the spec's own
`concurrency=` wins without asking; the gauge's labels are read as Prometheus writes them."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mia_core.model.served.capacity import FALLBACK_CONCURRENCY, cache_config, concurrency_for, kv_capacity
from mia_core.model.served.http import Client
from mia_core.model.served.spec import parse_served_spec


class Metrics(BaseHTTPRequestHandler):
    """GET /metrics answers the server's `page` (None: 404, as a server without metrics); every path is recorded."""

    def do_GET(self):  # noqa: N802 (the stdlib's name)
        self.server.seen.append(self.path)
        page = self.server.page if self.path == "/metrics" else None
        data = (page or "Not Found").encode()
        self.send_response(404 if page is None else 200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    httpd.page, httpd.seen = None, []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def _sized(httpd, settings: str = ""):
    spec = parse_served_spec(f"http://127.0.0.1:{httpd.server_address[1]}/v1?retries=0{settings}")
    return concurrency_for(spec, Client(spec), 2047)


def test_no_metrics_falls_back_to_8_and_says_why(server):
    sized = _sized(server)
    assert sized.value == FALLBACK_CONCURRENCY == 8
    assert "no /metrics to size it from" in sized.why and "HTTP 404" in sized.why
    assert server.seen == ["/metrics"]  # asked beside /v1, where vLLM serves it


def test_metrics_without_the_cache_gauge_fall_back_to_8(server):
    server.page = "# TYPE http_requests_total counter\nhttp_requests_total{handler=\"/v1/models\"} 3.0\n"
    sized = _sized(server)
    assert sized.value == 8 and "gives no KV-cache size" in sized.why


@pytest.mark.parametrize("blocks, expected", [(182, 11), (1, 1), (100_000, 64)])
def test_the_cache_gauge_sizes_it_clamped_to_1_and_64(server, blocks, expected):
    server.page = ('vllm:cache_config_info{block_size="128",cache_dtype="auto",engine="0",note="a \\"quoted\\" '
                   f'value",num_cpu_blocks="None",num_gpu_blocks="{blocks}"}} 1.0\n')
    sized = _sized(server)
    assert sized.value == expected == max(1, min(64, blocks * 128 // 2047))
    assert f"{blocks} blocks × 128 tokens" in sized.why


def test_the_spec_s_concurrency_wins_without_asking(server):
    sized = _sized(server, "&concurrency=3")
    assert (sized.value, sized.why, server.seen) == (3, "concurrency= in the spec", [])
    other = _sized(server, "&api=sglang")
    assert other.value == 8 and "api=sglang" in other.why and server.seen == []


def test_gauge_labels_as_prometheus_writes_them():
    page = ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
            'vllm:cache_config_info{block_size="16",note="x=\\"y\\", z",num_gpu_blocks="None"} 1.0\n')
    labels = cache_config(page)
    assert labels["block_size"] == "16" and labels["note"] == 'x=\\"y\\", z'
    assert kv_capacity(labels) is None  # no device blocks: nothing to size from
    assert cache_config("vllm:num_requests_running 0.0\n") is None

"""Loopback ports for the servers the tests start (the dashboard, vLLM engines, proxies)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

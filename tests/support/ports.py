"""Loopback ports for the servers the tests start (the dashboard, vLLM engines, proxies).

A port comes from a block below Linux's ephemeral range (32768-60999 by default: where the kernel puts outgoing
connections and `bind` to port 0), one block per pytest-xdist worker. A starting server binds its port seconds after
`free_port` closed its probe; in between, no other worker hands the same port out and no connection takes it.
"""
from __future__ import annotations

import itertools
import os
import random
import socket

#: The serial run's block starts here; worker gwN's block is N + 1 blocks above (gw0-gw11 stay under 32768).
FIRST_PORT = 20_000
BLOCK = 1_000
#: Ports this process handed out: a server stopped and restarted elsewhere never finds its old port taken by another.
_handed_out: set[int] = set()


def port_block() -> range:
    """This process's ports: the serial run's block, or worker gwN's own (`PYTEST_XDIST_WORKER`)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) + 1 if worker.startswith("gw") and worker[2:].isdigit() else 0
    start = FIRST_PORT + index * BLOCK
    return range(start, start + BLOCK)


def free_port() -> int:
    """A loopback port nobody listens on now, from this process's block, never one it handed out before."""
    block = port_block()
    first = random.randrange(len(block))  # another checkout's run beside this one starts elsewhere in the block
    for port in itertools.chain(block[first:], block[:first]):
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free loopback port in {block.start}-{block.stop - 1}")


def _bindable(port: int) -> bool:
    """Whether 127.0.0.1:`port` can be bound now (no listener, no connection lingering on it)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

"""A loopback TCP proxy that can be stopped and started again on the same port: from a client's side, a server that
dies (connections refused and reset) and comes back. It counts the connections it forwarded and the HTTP requests
sent through them (request lines in the client's bytes), so a test can see what reached the server and when."""
from __future__ import annotations

import re
import socket
import threading

from tests.support.ports import free_port

#: An HTTP/1.x request line (JSON bodies of token ids never contain one).
REQUEST_LINE = re.compile(rb"(?:GET|POST|PUT|DELETE|HEAD|OPTIONS|PATCH) /[^ \r\n]* HTTP/1\.[01]\r\n")
#: Bytes of one connection's stream kept between reads, so a request line split across two reads is still found.
TAIL_BYTES = 256


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target` while started; `stop` closes the listener and every open connection.

    Without a port it takes one from `free_port`'s block, so no other test worker's server or connection takes it while
    the proxy is stopped."""

    def __init__(self, target: tuple[str, int], port: int = 0):
        self.target, self.port = target, port
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        #: Connections forwarded, and HTTP requests the client sent through them, since the proxy was made.
        self.connections = 0
        self.requests = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "TcpProxy":
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port or free_port()))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            for conn in self._open:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
                self.connections += 1
            for a, b, count in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pipe, args=(a, b, count), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, count: bool) -> None:
        tail = b""
        try:
            while data := source.recv(65536):
                if count:  # request lines completed by this read (those wholly in `tail` were counted before)
                    seen = tail + data
                    new = len(REQUEST_LINE.findall(seen)) - len(REQUEST_LINE.findall(tail))
                    with self._lock:
                        self.requests += new
                    tail = seen[-TAIL_BYTES:]
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for conn in (source, sink):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

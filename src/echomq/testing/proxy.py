"""A loopback TCP proxy for fault tests: workers connect to Redis through it, and the test cuts and
restores the connection between them.

``Proxy(target_port).start()`` listens on a free loopback port (:attr:`Proxy.url` names Redis through it)
and forwards every connection to ``127.0.0.1:<target_port>``, one pair of pump threads a connection.

* :meth:`Proxy.cut` ``("reset")`` closes every forwarded connection at once and refuses new ones (the
  network is down: a client's next call fails fast and it reconnects later);
* :meth:`Proxy.cut` ``("blackhole")`` keeps connections open but forwards nothing either way (a
  partition: calls hang until the client's socket timeout);
* :meth:`Proxy.restore` forwards again (a blackhole's held bytes are dropped, as a lost packet's would be;
  the connections it held are closed, so clients reconnect cleanly).

It is a test tool: it never runs in a normal deployment.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Literal

from echomq.testing.server import free_port

Mode = Literal["reset", "blackhole"]
_CHUNK = 65536


class Proxy:
    def __init__(self, target_port: int, *, port: int | None = None, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self.cuts = 0
        self._state: Literal["open", "reset", "blackhole"] = "open"
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener: socket.socket | None = None
        self._closed = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Proxy:
        self._listen()
        return self

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="proxy-accept", daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # the listener was closed: a reset cut, or close()
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pairs.append((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(source, sink), name="proxy-pump", daemon=True
                ).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                if self._state == "blackhole":
                    continue  # swallowed, as a partition would
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _drop_connections(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def cut(self, mode: Mode = "reset") -> None:
        """Cut the link between the clients and Redis (see the module doc for the two modes)."""
        if mode not in ("reset", "blackhole"):
            raise ValueError(f"a cut is 'reset' or 'blackhole', got {mode!r}")
        self.cuts += 1
        self._state = mode
        if mode == "reset":
            self._stop_listening()
            self._drop_connections()

    def restore(self) -> None:
        """Forward again."""
        if self._state == "blackhole":
            self._drop_connections()
        self._state = "open"
        if self._listener is None and not self._closed:
            self._listen()

    def _stop_listening(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the other thread
            listener.close()

    def close(self) -> None:
        self._closed = True
        self._stop_listening()
        self._drop_connections()

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

"""A recorder of the commands clients send to a redis-server (MONITOR), for the idle-budget test and the
benchmark."""

from __future__ import annotations

import socket
import threading


class CommandMonitor:
    """Records the commands that clients (not scripts) send to a server, through a raw MONITOR connection.

    ``INFO commandstats`` also counts the commands a Lua script runs inside itself; MONITOR marks those
    ``lua``, so :meth:`close` can return exactly the commands clients sent (for the idle budget).
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        self.sock.settimeout(0.2)
        buffer = b""
        while not self._stop.is_set():
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                return
            buffer += chunk
            *complete, buffer = buffer.split(b"\r\n")
            self.lines += [line.decode(errors="replace") for line in complete if line.startswith(b"+1")]

    def close(self, *, scripts: bool = False) -> list[str]:
        """Stop recording; the MONITOR lines of the commands clients sent (with ``scripts``, also those
        that scripts ran, marked ``lua``)."""
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        return self.lines if scripts else [line for line in self.lines if "[0 lua]" not in line]

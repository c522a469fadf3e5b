"""A fixed pool of daemon threads for the handlers that are not ``async def`` (daemon, so a hung handler
never keeps the process alive), sized to the worker's concurrency."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any


class DaemonThreads:
    """A fixed pool of daemon threads that hands results back to the event loop as futures."""

    def __init__(self, size: int, name: str = "echomq-handler") -> None:
        self.size = size
        self.name = name
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, call: Callable[[], Any]) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self._idle == 0 and len(self._threads) < self.size:
                thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}")
                thread.daemon = True
                self._threads.append(thread)
                self._idle += 1
                thread.start()
            self._idle -= 1
        future.add_done_callback(_retrieve)
        self._queue.put((call, future))
        return future

    def shutdown(self) -> None:
        """Let idle threads exit; busy ones exit after their call (they are daemons either way)."""
        for _ in self._threads:
            self._queue.put(None)
        self._threads.clear()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            call, future = item
            loop = future.get_loop()
            try:
                value = call()
            except BaseException as exc:  # noqa: BLE001  (handed to the awaiting task, never lost)
                self._hand_back(loop, future, None, exc)
            else:
                self._hand_back(loop, future, value, None)
            with self._lock:
                self._idle += 1

    @staticmethod
    def _hand_back(
        loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], value: Any, exc: BaseException | None
    ) -> None:
        def settle() -> None:
            if future.done():
                return
            if exc is None:
                future.set_result(value)
            else:
                future.set_exception(exc)

        # RuntimeError: the loop closed while a timed-out handler ran on; its result is ignored.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a thread's outcome as seen: a result nobody awaits any more (timeout, shutdown) is ignored."""
    if not future.cancelled():
        future.exception()

"""A stream's subscriber to the events hub (:mod:`codemojex.web.hub`): its bounded queue of events,
the ``resync`` that replaces what a slow reader missed, and its end (a last event, then ``None``); the
over-a-cap error :class:`TooManyStreams`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

QUEUE_SIZE = 256

Event = tuple[str, dict[str, Any]]


class TooManyStreams(Exception):
    """Over a stream cap: ``which`` is ``player``, ``address`` or ``host``."""

    def __init__(self, which: str) -> None:
        super().__init__(f"too many event streams open for this {which}")
        self.which = which


@dataclass(eq=False)
class Subscriber:
    round_id: str
    player_id: str
    address: str = ""
    token_digest: str | None = None  # of the token the stream was opened with; None: not checked
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    ended: bool = False

    def offer(self, event: Event) -> None:
        if self.ended:  # its last event is queued: nothing after it
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:  # too slow: drop what it has not read, tell it to refetch
            self._drain()
            self.queue.put_nowait(("resync", {"round_id": self.round_id}))

    def finish(self, last: Event) -> None:
        """A last event after the ones queued (the round's close), then the end; once."""
        if self.ended:
            return
        self.offer(last)
        self.ended = True
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:
            self._drain()
            self.queue.put_nowait(last)
            self.queue.put_nowait(None)

    def end(self, last: Event | None = None) -> None:
        self.ended = True
        self._drain()
        if last is not None:
            self.queue.put_nowait(last)
        self.queue.put_nowait(None)

    def _drain(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()

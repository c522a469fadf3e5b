"""The events hub: one follower per watched round fans its scored guesses and leaderboard changes out.

``score.lua`` appends one entry to the round's stream ``cmx:{t}:events:<RND>`` for each guess it scores
(only when it writes the record, so a redelivery adds none). The :class:`Hub` follows each round that
has subscribers with one blocking ``XREAD`` (one connection per round, not per browser), and fans the
entries out: a ``scored`` event to the guess's own player, then one ``leaderboard`` event with the new
top of the board to everyone watching the round. A subscriber that falls behind gets ``resync`` (the page
refetches) instead of an unbounded queue. :mod:`codemojex.web.events` streams a subscriber's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from codemojex import leaderboard
from codemojex.errors import CodemojexError
from codemojex.game import Game, translate_errors
from codemojex.web import views

log = logging.getLogger("codemojex.web.hub")

BLOCK_MS = 2000  # under redis-py's default socket timeout (5 s), so a quiet round is not an error
QUEUE_SIZE = 256
BOARD_SHOWN = 20

Event = tuple[str, dict[str, Any]]


@dataclass(eq=False)
class Subscriber:
    round_id: str
    player_id: str
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))

    def offer(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:  # too slow: drop what it has not read, tell it to refetch
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(("resync", {"round_id": self.round_id}))


class Hub:
    def __init__(self, game: Game) -> None:
        self.game = game
        self.rounds: dict[str, set[Subscriber]] = {}
        self.followers: dict[str, asyncio.Task[None]] = {}
        self.closed = False

    def subscribe(self, round_id: str, player_id: str) -> Subscriber:
        subscriber = Subscriber(round_id, player_id)
        if self.closed:
            subscriber.queue.put_nowait(None)
            return subscriber
        self.rounds.setdefault(round_id, set()).add(subscriber)
        if round_id not in self.followers:
            self.followers[round_id] = asyncio.create_task(self._follow(round_id), name=f"events-{round_id}")
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        watching = self.rounds.get(subscriber.round_id)
        if watching is not None:
            watching.discard(subscriber)

    async def _follow(self, round_id: str) -> None:
        key = self.game.keys.events(round_id)
        last = "$"
        try:
            while self.rounds.get(round_id):
                try:
                    with translate_errors():
                        reply = await self.game.redis.xread({key: last}, count=100, block=BLOCK_MS)
                    if reply:
                        last = self._publish(round_id, reply[0][1])
                        await self._publish_board(round_id)
                except CodemojexError as exc:
                    log.warning("events of %s: %s; retrying", round_id, exc)
                    await asyncio.sleep(1.0)
        finally:
            self.followers.pop(round_id, None)
            if not self.rounds.get(round_id):
                self.rounds.pop(round_id, None)

    def _publish(self, round_id: str, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> str:
        last = "$"
        for entry_id, fields in entries:
            last = entry_id.decode()
            if fields.get(b"kind") != b"scored":
                continue
            event: Event = (
                "scored",
                {
                    "round_id": round_id,
                    "job_id": fields.get(b"job", b"").decode(),
                    "guess_id": fields[b"guess"].decode(),
                    "code": fields[b"code"].decode(),
                    "solved": fields.get(b"solved") == b"true",
                },
            )
            player = fields[b"player"].decode()
            for subscriber in list(self.rounds.get(round_id, ())):
                if subscriber.player_id == player:
                    subscriber.offer(event)
        return last

    async def _publish_board(self, round_id: str) -> None:
        entries = await leaderboard.read_board(self.game, round_id, BOARD_SHOWN)
        event: Event = (
            "leaderboard",
            {"round_id": round_id, "entries": [views.entry_view(e) for e in entries]},
        )
        for subscriber in list(self.rounds.get(round_id, ())):
            subscriber.offer(event)

    async def close(self) -> None:
        """End every stream (the host is stopping) and the followers."""
        self.closed = True
        for watching in self.rounds.values():
            for subscriber in watching:
                while subscriber.queue.full():
                    subscriber.queue.get_nowait()
                subscriber.queue.put_nowait(None)
        self.rounds.clear()  # each follower ends after its current XREAD (at most BLOCK_MS)
        for task in list(self.followers.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

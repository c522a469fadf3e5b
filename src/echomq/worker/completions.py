"""Batched completions: the completes of one event-loop turn go to Redis in one pipeline.

A busy worker finishes many jobs at nearly the same moment; sending each ``complete.lua`` on its own
round trip would make the client, not Redis, the limit of a drain. :class:`Completions` collects the
completes requested during one turn of the event loop and sends them as one pipeline of EVALSHA calls
(no transaction: each is its own fenced script, exactly as :func:`echomq.finish.complete` would run it,
and each caller gets its own outcome or error). A script the server does not know yet (a restarted
server) is loaded and that call run again on its own. On a Redis Cluster the completes of a turn go
concurrently, one script call each (redis-py's cluster pipeline refuses scripts), with the same outcomes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import redis.exceptions

from echomq import finish, jobs
from echomq.errors import EchoMQError, translate_redis_errors, translated
from echomq.states import Finish

if TYPE_CHECKING:
    from echomq.bus import Bus
    from echomq.jobs import Claim

_Pending = tuple["Claim", list[str], list[Any], "asyncio.Future[Finish]"]


def _settle(future: asyncio.Future[Finish], value: Finish | None, exc: BaseException | None) -> None:
    if future.done():  # the waiter was cancelled (shutdown): the outcome is in Redis anyway
        return
    if exc is not None:
        future.set_exception(exc)
    elif value is not None:
        future.set_result(value)


class Completions:
    """Completes for one bus, batched per event-loop turn."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._pending: list[_Pending] = []
        self._flushes: set[asyncio.Task[None]] = set()

    async def complete(self, claim: Claim, result: bytes) -> Finish:
        """Like :func:`echomq.finish.complete`; bad input raises at once, before anything is sent."""
        keys, args = finish.complete_call(self.bus, claim, result)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Finish] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush_now)
        self._pending.append((claim, keys, args, future))
        return await future

    async def aclose(self) -> None:
        """Wait for the pipelines already sent."""
        if self._pending:
            self._flush_now()
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    def _flush_now(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.create_task(self._flush(batch))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def _flush(self, batch: list[_Pending]) -> None:
        try:
            replies = await self._send(batch)
        except EchoMQError as exc:
            for *_, future in batch:
                _settle(future, None, type(exc)(str(exc)))
            return
        for (claim, keys, args, future), reply in zip(batch, replies, strict=True):
            await self._answer(claim, keys, args, future, reply)

    async def _send(self, batch: list[_Pending]) -> list[Any]:
        """One reply per complete, a refused call's error in its place; raises if none could be sent."""
        sha = self.bus.scripts.get("complete", batch[0][1]).sha
        with translate_redis_errors():
            if self.bus.is_cluster:  # the cluster pipeline refuses scripts: one call each, concurrently
                calls = [(keys, args) for _, keys, args, _ in batch]
                return await jobs.run_each(self.bus, "complete", calls, return_exceptions=True)
            async with self.bus.redis.pipeline(transaction=False) as pipe:
                for _, keys, args, _ in batch:
                    pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
                return await pipe.execute(raise_on_error=False)

    async def _answer(
        self, claim: Claim, keys: list[str], args: list[Any], future: asyncio.Future[Finish], reply: Any
    ) -> None:
        try:
            if isinstance(reply, redis.exceptions.NoScriptError):
                with translate_redis_errors():
                    reply = await self.bus.scripts.run("complete", keys, args)
            if isinstance(reply, BaseException):  # refused, or (one call of a cluster batch) unreachable
                raise translated(reply)
            _settle(future, finish.finish_outcome(claim, reply), None)
        except EchoMQError as exc:
            _settle(future, None, exc)

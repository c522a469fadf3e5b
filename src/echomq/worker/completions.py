"""Batched completions: the completes of one event-loop turn go to Redis in one write.

A busy worker finishes many jobs at nearly the same moment; sending each ``complete.lua`` on its own
round trip would make the client, not Redis, the limit of a drain. :class:`Completions` collects the
completes requested during one turn of the event loop and sends them as one pipeline of EVALSHA calls
(no transaction: each is its own fenced script, exactly as :func:`echomq.finish.complete` would run it,
and each caller gets its own outcome or error). A script the server does not know yet (a restarted
server) is loaded and that call run again on its own. On a Redis Cluster the completes of a turn go
concurrently, one script call each (redis-py's cluster pipeline refuses scripts), with the same outcomes.

Cost per job: on a single node the EVALSHA commands are written in the Redis protocol here, from the
parts that never change (script sha, the bus's keys, retention arguments: built once per bus) and the
four that do (the row's key, id, token, request id, result), and sent on one pooled connection whose
replies are read under one socket timeout for the whole batch; redis-py's pipeline would encode every
argument of every command and arm a timer per reply. A lost reply of the batch (a timeout, a cut) fails
each caller with :class:`~echomq.errors.RedisUnavailable`, whatever ran: each complete is safe to send
again, and its retry answers ``DONE`` for a job this very claim completed (:func:`echomq.finish.complete`).
A complete with effects (:mod:`echomq.effects`) goes in the same batch as its own
``complete_effects.lua`` call, packed by hiredis: it is fenced and all-or-nothing by itself, its retry
answers ``DONE`` without applying anything again, as any complete's.
Claims reach this module from the worker, read from claim.lua's reply: their ids were checked when the
jobs were admitted, so the row's key is built without parsing them again.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

import redis.exceptions
from redis.asyncio import Redis

from echomq import effects as effects_module
from echomq import finish, jobs
from echomq._wire import pack
from echomq.core import finish_args
from echomq.errors import EchoMQError, translate_redis_errors, translated
from echomq.jobs import check_bytes
from echomq.partitions import AnyBus, PartitionedBus
from echomq.states import Finish

if TYPE_CHECKING:
    from echomq.bus import Bus
    from echomq.effects import Effects
    from echomq.jobs import Claim

# A job's complete: its claim, its EVALSHA in the Redis protocol, the result, its effects (None: a plain
# complete), and its caller's future.
_Pending = tuple["Claim", bytes, bytes, "Effects | None", "asyncio.Future[Finish]"]


def _bulk(data: bytes) -> bytes:
    """One bulk string of the Redis protocol."""
    return b"$%d\r\n%b\r\n" % (len(data), data)


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
        self.waiting = 0  # completes asked for and not answered yet
        keys = bus.keys
        self._max_result = bus.settings.max_payload
        self._job_prefix = f"{keys.prefix}job:".encode()
        # Every part of a complete.lua call but the row's key, id, token, request id and result.
        sha = bus.scripts.get("complete", [self._job_prefix.decode(), keys.active, keys.done, keys.stats]).sha
        parts = 3 + 4 + 7  # EVALSHA sha numkeys, the 4 keys, the 7 args (see lua/complete.lua)
        self._head = b"*%d\r\n$7\r\nEVALSHA\r\n%b$1\r\n4\r\n" % (parts, _bulk(sha.encode()))
        self._shared_keys = b"".join(_bulk(key.encode()) for key in (keys.active, keys.done, keys.stats))
        self._tail = b"".join(_bulk(str(arg).encode()) for arg in finish_args(bus))
        self._effects_sha = bus.scripts.get("complete_effects", [keys.active] * 4).sha

    def _wire(self, claim: Claim, result: bytes) -> bytes:
        """The EVALSHA of ``claim``'s complete.lua call, in the Redis protocol (one format, no join)."""
        job = claim.job.encode()
        token = b"%d" % claim.token
        request = claim.request.encode()
        return b"%b$%d\r\n%b%b\r\n%b$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n%b" % (
            self._head,
            len(self._job_prefix) + len(job),
            self._job_prefix,
            job,
            self._shared_keys,
            len(job),
            job,
            len(token),
            token,
            len(request),
            request,
            len(result),
            result,
            self._tail,
        )

    async def complete(self, claim: Claim, result: bytes, effects: Effects | None = None) -> Finish:
        """Like :func:`echomq.finish.complete` (with ``effects``, :func:`echomq.effects.complete`); bad
        input raises at once, before anything is sent."""
        data = check_bytes("result", result, self._max_result)
        if effects is not None and not len(effects):
            effects = None
        if effects is None:
            wire = self._wire(claim, data)
        else:
            wire = pack(self._effects_sha, *effects_module.complete_call(self.bus, claim, data, effects))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Finish] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush_now)
        self._pending.append((claim, wire, data, effects, future))
        self.waiting += 1
        try:
            return await future
        finally:
            self.waiting -= 1

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
            with translate_redis_errors():
                replies = await (self._send_each(batch) if self.bus.is_cluster else self._send(batch))
        except EchoMQError as exc:
            for *_, future in batch:
                _settle(future, None, type(exc)(str(exc)))
            return
        for (claim, _, result, effects, future), sent in zip(batch, replies, strict=True):
            reply = (
                await self._again(claim, result, effects)
                if isinstance(sent, redis.exceptions.NoScriptError)
                else sent
            )
            if isinstance(reply, BaseException):  # refused, or (one call of a cluster batch) unreachable
                _settle(future, None, translated(reply))
                continue
            try:
                read = finish.finish_outcome if effects is None else effects_module.outcome
                _settle(future, read(claim, reply), None)
            except EchoMQError as exc:
                _settle(future, None, exc)

    async def _send(self, batch: list[_Pending]) -> list[Any]:
        """One reply per complete, a refused call's error in its place, read from one pooled connection;
        raises (redis-py's errors) if the batch could not be sent or its replies could not all be read."""
        client = self.bus.redis
        assert isinstance(client, Redis)  # a cluster's batch goes by _send_each
        pool = client.connection_pool
        # redis-py leaves get_connection untyped
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await conn.send_packed_command([wire for _, wire, *_ in batch])
            replies: list[Any] = []
            # One socket timeout for the whole batch (math.inf: no timer per reply).
            async with asyncio.timeout(conn.socket_timeout):
                for _ in batch:
                    try:
                        replies.append(await conn.read_response(timeout=math.inf))
                    except redis.exceptions.ResponseError as exc:  # that call's refusal; the rest follow
                        replies.append(exc)
        except TimeoutError:
            await conn.disconnect(nowait=True)  # replies may still come: this connection is out of step
            raise redis.exceptions.TimeoutError("Timeout reading the completes' replies") from None
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        finally:
            await pool.release(conn)
        return replies

    async def _send_each(self, batch: list[_Pending]) -> list[Any]:
        """A cluster's batch: one script call each, concurrently (its pipeline refuses scripts); the
        completes with effects and those without are two groups of calls, their replies put in order."""
        plain = [i for i, (*_, effects, _) in enumerate(batch) if effects is None]
        rest = [i for i, (*_, effects, _) in enumerate(batch) if effects is not None]
        calls = [self._call(*batch[i][:4]) for i in plain], [self._call(*batch[i][:4]) for i in rest]
        done = await asyncio.gather(
            *(
                jobs.run_each(self.bus, name, [call for _, call in group], return_exceptions=True)
                for name, group in zip(("complete", "complete_effects"), calls, strict=True)
            )
        )
        replies: list[Any] = [None] * len(batch)
        for places, answers in zip((plain, rest), done, strict=True):
            for i, reply in zip(places, answers, strict=True):
                replies[i] = reply
        return replies

    def _call(
        self, claim: Claim, _wire: bytes, result: bytes, effects: Effects | None
    ) -> tuple[str, tuple[list[Any], list[Any]]]:
        """The script and the keys and args of one pending complete."""
        if effects is None:
            return "complete", finish.complete_call(self.bus, claim, result)
        return "complete_effects", effects_module.complete_call(self.bus, claim, result, effects)

    async def _again(self, claim: Claim, result: bytes, effects: Effects | None) -> Any:
        """A complete the server had no script for, run on its own (which loads the script)."""
        name, (keys, args) = self._call(claim, b"", result, effects)
        try:
            with translate_redis_errors():
                return await self.bus.scripts.run(name, keys, args)
        except EchoMQError as exc:
            return exc


class RoutedCompletions:
    """Completes for a :class:`~echomq.partitions.PartitionedBus`: one :class:`Completions` per
    partition, each claim's complete batched with the others of its partition."""

    def __init__(self, bus: PartitionedBus) -> None:
        self.bus = bus
        self._parts = {part.tag: Completions(part) for part in bus.partitions}

    @property
    def waiting(self) -> int:
        return sum(part.waiting for part in self._parts.values())

    async def complete(self, claim: Claim, result: bytes, effects: Effects | None = None) -> Finish:
        return await self._parts[self.bus.route(claim.lane).tag].complete(claim, result, effects)

    async def aclose(self) -> None:
        await asyncio.gather(*(part.aclose() for part in self._parts.values()))


def completions_for(bus: AnyBus) -> Completions | RoutedCompletions:
    """The completes' batcher of a worker on ``bus``."""
    return RoutedCompletions(bus) if isinstance(bus, PartitionedBus) else Completions(bus)

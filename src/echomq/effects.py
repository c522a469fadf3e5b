"""Effects with the completion: a handler's Redis writes and the fenced complete, in one atomic step.

Delivery is at least once, so a handler's effect outside the queue may run twice, or run for a worker
that no longer owns the job (its lease was reaped and the job re-claimed). When the effect is a few
Redis writes, :class:`Effects` lists them and ``await bus.complete(claim, result, effects=fx)`` sends
them with the completion as one script (``lua/complete_effects.lua``), with no Lua to write::

    fx = Effects().incrby("app:{cm}:orders", 1).hset("app:{cm}:order:7", "state", "paid")
    outcome = await bus.complete(claim, b"ok", effects=fx)   # Finish.DONE or Finish.STALE

Guarantees:

* **All or nothing, fenced.** The effects apply and the job completes, or nothing changes. A claim that
  no longer owns the job (stale token, another claim call, the job finished or revoked) gets
  ``Finish.STALE`` and no effect runs. The effects are checked against the data before the first one
  runs (:class:`~echomq.errors.EffectRefused` when one cannot apply: a key of another type, a counter
  that is not an integer or would leave +-(2**53 - 1)); nothing changed then, the job is still active.
* **Lost reply.** The effects applied and the job is done; the retry of the same call (same claim)
  answers ``Finish.DONE`` and applies nothing again. The worker retries a complete whose reply was lost,
  so a handler's effects apply once however the reply fares.
* **Bad input changes nothing.** Each builder method checks its arguments at once, and the call checks
  the keys against the bus (:class:`~echomq.errors.InvalidEffect`): no key under ``emq:`` (EchoMQ's),
  and on a Redis Cluster every key in the bus's slot, i.e. with the bus's hash tag (``app:{cm}:x`` for
  the tag ``cm``). Nothing is sent until all of it passed.

The commands are a fixed set of writes that cannot block or run code: SET (with PX), DEL, PEXPIRE,
INCRBY, HSET, HDEL, HINCRBY, ZADD, ZINCRBY, ZREM, SADD, SREM, RPUSH, LPUSH and XADD (with a MAXLEN, so
a stream stays bounded). Arguments follow each Redis command's order. Writes elsewhere (a database)
use the claim's token as a fencing token instead: see the fencing recipe in the documentation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from redis.crc import key_slot

from echomq import finish
from echomq._validate import check_utf8
from echomq.errors import EffectRefused, InvalidEffect, translate_redis_errors
from echomq.jobs import reply_code
from echomq.states import Finish

if TYPE_CHECKING:
    from echomq.core import BusCore
    from echomq.jobs import Claim

MAX_EFFECTS = 1000  # commands in one call
MAX_ARGS = 1000  # arguments of one command (Lua unpacks them: it takes about 8,000 at most)
MAX_BYTES = 1024 * 1024  # keys and arguments of one call, together
MAX_KEY = 1024  # bytes of one key
MAX_COUNTER = 2**53 - 1  # counters stay integers a Lua number holds exactly (include "effects")
MAX_TTL_MS = 10 * 365 * 24 * 3600 * 1000
MAX_STREAM_LEN = 1_000_000_000
_RESERVED = b"emq:"  # EchoMQ's own keys: never an effect's

Key = str | bytes
Value = str | bytes | int


def _fail(message: str) -> InvalidEffect:
    return InvalidEffect(message)


def _bytes(name: str, value: object) -> bytes:
    """``value`` as bytes: bytes as they are, str as UTF-8, an int in decimal; anything else refused."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return check_utf8(name, value, InvalidEffect).encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    raise _fail(f"{name} is str, bytes or int, got {type(value).__name__}")


def _key(key: object) -> bytes:
    if not isinstance(key, str | bytes):
        raise _fail(f"a key is str or bytes, got {type(key).__name__}")
    data = _bytes("key", key)
    if not 1 <= len(data) <= MAX_KEY:
        raise _fail(f"a key is 1-{MAX_KEY} bytes, got {len(data)}")
    if data.startswith(_RESERVED):
        raise _fail(f"{key!r} is under 'emq:', EchoMQ's own keys: an effect never writes them")
    return data


def _int(name: str, value: object, low: int, high: int) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(f"{name} is an int from {low} to {high}, got {value!r}")
    return str(value).encode()


def _score(name: str, value: object, *, finite: bool) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(f"{name} is an int or a float, got {type(value).__name__}")
    number = float(value)
    if math.isnan(number) or (finite and math.isinf(number)):
        raise _fail(f"{name} is {'a finite' if finite else 'a'} number, got {value!r}")
    return str(value).encode() if isinstance(value, int) else repr(number).encode()


class Effects:
    """A list of Redis writes to apply with a job's completion (see the module doc); each method checks
    its arguments (:class:`~echomq.errors.InvalidEffect`), appends one command and returns ``self``.

    Values are ``str`` (sent as UTF-8), ``bytes`` or ``int``; arguments follow the Redis command's order.
    """

    __slots__ = ("_commands", "_size")

    def __init__(self) -> None:
        self._commands: list[tuple[str, bytes, tuple[bytes, ...]]] = []
        self._size = 0

    def _add(self, op: str, key: Key, *args: bytes) -> Effects:
        data = _key(key)
        if len(self._commands) >= MAX_EFFECTS:
            raise _fail(f"at most {MAX_EFFECTS} effects in one call")
        if len(args) > MAX_ARGS:
            raise _fail(f"at most {MAX_ARGS} arguments in one effect, got {len(args)}")
        size = self._size + len(data) + sum(len(arg) for arg in args)
        if size > MAX_BYTES:
            raise _fail(f"the effects of one call hold at most {MAX_BYTES} bytes")
        self._commands.append((op, data, args))
        self._size = size
        return self

    @staticmethod
    def _many(name: str, values: tuple[Value, ...]) -> list[bytes]:
        if not values:
            raise _fail(f"{name}: give at least one")
        return [_bytes(name, value) for value in values]

    def set(self, key: Key, value: Value, *, px: int | None = None) -> Effects:
        """SET ``key`` ``value`` (any type it held is replaced), expiring in ``px`` ms when given."""
        tail = () if px is None else (b"PX", _int("px", px, 1, MAX_TTL_MS))
        return self._add("SET", key, _bytes("value", value), *tail)

    def delete(self, key: Key) -> Effects:
        """DEL ``key``."""
        return self._add("DEL", key)

    def pexpire(self, key: Key, ms: int) -> Effects:
        """PEXPIRE ``key`` ``ms`` (a key that does not exist is left so)."""
        return self._add("PEXPIRE", key, _int("ms", ms, 1, MAX_TTL_MS))

    def incrby(self, key: Key, amount: int) -> Effects:
        """INCRBY ``key`` ``amount`` (a counter within +-(2**53 - 1))."""
        return self._add("INCRBY", key, _int("amount", amount, -MAX_COUNTER, MAX_COUNTER))

    def hset(self, key: Key, field: Value, value: Value) -> Effects:
        """HSET ``key`` ``field`` ``value``."""
        return self._add("HSET", key, _bytes("field", field), _bytes("value", value))

    def hdel(self, key: Key, *fields: Value) -> Effects:
        """HDEL ``key`` ``field`` ..."""
        return self._add("HDEL", key, *self._many("field", fields))

    def hincrby(self, key: Key, field: Value, amount: int) -> Effects:
        """HINCRBY ``key`` ``field`` ``amount`` (a counter within +-(2**53 - 1))."""
        by = _int("amount", amount, -MAX_COUNTER, MAX_COUNTER)
        return self._add("HINCRBY", key, _bytes("field", field), by)

    def zadd(self, key: Key, score: float, member: Value) -> Effects:
        """ZADD ``key`` ``score`` ``member`` (the member's score set to ``score``)."""
        return self._add("ZADD", key, _score("score", score, finite=False), _bytes("member", member))

    def zincrby(self, key: Key, amount: float, member: Value) -> Effects:
        """ZINCRBY ``key`` ``amount`` ``member`` (``amount`` finite)."""
        return self._add("ZINCRBY", key, _score("amount", amount, finite=True), _bytes("member", member))

    def zrem(self, key: Key, *members: Value) -> Effects:
        """ZREM ``key`` ``member`` ..."""
        return self._add("ZREM", key, *self._many("member", members))

    def sadd(self, key: Key, *members: Value) -> Effects:
        """SADD ``key`` ``member`` ..."""
        return self._add("SADD", key, *self._many("member", members))

    def srem(self, key: Key, *members: Value) -> Effects:
        """SREM ``key`` ``member`` ..."""
        return self._add("SREM", key, *self._many("member", members))

    def rpush(self, key: Key, *values: Value) -> Effects:
        """RPUSH ``key`` ``value`` ..."""
        return self._add("RPUSH", key, *self._many("value", values))

    def lpush(self, key: Key, *values: Value) -> Effects:
        """LPUSH ``key`` ``value`` ..."""
        return self._add("LPUSH", key, *self._many("value", values))

    def xadd(
        self, key: Key, fields: Mapping[Value, Value], *, maxlen: int, approximate: bool = True
    ) -> Effects:
        """XADD ``key`` MAXLEN [~] ``maxlen`` * ``field value ...`` (an id made by Redis; the stream kept
        to about ``maxlen`` entries, exactly that many with ``approximate=False``)."""
        given: object = fields  # checked: a caller's value, whatever its annotation says
        if not isinstance(given, Mapping) or not given:
            raise _fail("xadd takes a non-empty mapping of fields to values")
        if not isinstance(approximate, bool):
            raise _fail(f"approximate is a bool, got {approximate!r}")
        pairs = [part for f, v in fields.items() for part in (_bytes("field", f), _bytes("value", v))]
        cap = _int("maxlen", maxlen, 1, MAX_STREAM_LEN)
        return self._add("XADD", key, cap, b"1" if approximate else b"0", *pairs)

    @property
    def commands(self) -> tuple[tuple[str, bytes, tuple[bytes, ...]], ...]:
        """The commands so far: (name, key, arguments as sent)."""
        return tuple(self._commands)

    def __len__(self) -> int:
        return len(self._commands)

    def __repr__(self) -> str:
        return f"Effects({', '.join(f'{op} {key!r}' for op, key, _ in self._commands)})"


@dataclass(frozen=True, slots=True)
class Completion:
    """What a worker's handler returns to complete its job with ``result`` and ``effects`` in one step
    (a handler may also return an :class:`Effects` alone: the result is then empty)."""

    result: bytes = b""
    effects: Effects | None = None


def complete_call(bus: BusCore, claim: Claim, result: bytes, effects: Effects) -> tuple[list[Any], list[Any]]:
    """Keys (str, then the effects' bytes) and args of one complete_effects.lua call; every input is
    checked first (the claim, the result, each key against the bus: see the module doc)."""
    if not isinstance(effects, Effects):
        raise _fail(f"effects is an echomq.Effects, got {type(effects).__name__}")
    keys, args = finish.complete_call(bus, claim, result)
    commands = effects.commands
    slot = key_slot(bus.keys.prefix.encode()) if bus.is_cluster else None
    positions: dict[bytes, int] = {}
    program: list[Any] = []
    for op, key, arguments in commands:
        if slot is not None and key_slot(key) != slot:
            raise _fail(f"{key!r} is not in the bus's cluster slot: give it the bus's hash tag {{{bus.tag}}}")
        position = positions.setdefault(key, len(positions) + 1)
        program += [op, position, len(arguments), *arguments]
    return [*keys, *positions], [*args, len(commands), *program]


def outcome(claim: Claim, reply: Any) -> Finish:
    """Read a complete_effects.lua reply: ``DONE`` (also a retry's, code 4), ``STALE``, or
    :class:`EffectRefused` (code 5: nothing changed)."""
    code = reply_code("complete_effects", reply, claim.job)
    if code == 5:
        reason = reply[1].decode("utf-8", "replace") if isinstance(reply[1], bytes) else str(reply[1])
        raise EffectRefused(f"job {claim.job}: {reason}; nothing changed, the job is still active")
    return Finish.DONE if code in (1, 4) else Finish.STALE


async def complete(bus: BusCore, claim: Claim, result: bytes, effects: Effects) -> Finish:
    """Apply ``effects`` and complete ``claim`` with ``result`` in one script: ``Finish.DONE``, or
    ``Finish.STALE`` with no effect applied (see the module doc).

    Lost reply: the effects applied and the job is done; the retry answers ``DONE`` and applies nothing.
    No effects at all is :func:`echomq.finish.complete`."""
    given: object = effects  # checked by complete_call when it is not an Effects
    if isinstance(given, Effects) and not given.commands:
        return await finish.complete(bus, claim, result)
    keys, args = complete_call(bus, claim, result, effects)
    with translate_redis_errors():
        reply = await bus.scripts.run("complete_effects", keys, args)
    return outcome(claim, reply)

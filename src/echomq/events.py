"""Lifecycle and progress events on a capped stream: what happened to which job, in order.

Off by default. ``await bus.set_events(maxlen=100_000)`` turns them on (``None`` off); from then on
every script that changes a job's state appends an entry to the stream ``emq:{tag}:events`` in the
same atomic step (``lua/includes/events.lua``), so the stream tells of no change that did not happen
and, within its cap (``MAXLEN ~``: about the last ``maxlen`` entries are kept), misses none that did:
``admitted``, ``claimed``, ``completed``, ``retrying``, ``dead``, ``reclaimed``, ``released``,
``cancelled``, ``revoked``, ``resurrected``, ``deleted``, and ``progress``, which a handler publishes with
``await bus.progress(job.claim, "40%")`` (fenced: a worker that no longer holds the job publishes
nothing). Read them with :func:`events` (``bus.events(follow=True)``) or ``echomq events --follow``.

Cost: one field read per script while off; one XADD per change while on. Memory is the cap.
A retried script (a lost reply) that changed nothing appends nothing; a retried progress appends
again. While the bus's slot is being resharded an event may be left out (the stream on the other node).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq._validate import check_int
from echomq.errors import InvalidOption, ScriptError, translate_redis_errors
from echomq.jobs import check_claim

if TYPE_CHECKING:
    from echomq.core import BusCore
    from echomq.jobs import Claim
    from echomq.keyspace import Keyspace

MAX_EVENTS = 10_000_000
MAX_PROGRESS = 200  # characters of a progress text
KINDS = (
    "admitted",
    "claimed",
    "completed",
    "retrying",
    "dead",
    "reclaimed",
    "released",
    "cancelled",
    "revoked",
    "resurrected",
    "deleted",
    "progress",
)


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the stream: its id (``<server ms>-<n>``), the event, the job and its lane, the
    attempts token when a claim held it (else 0), and the error or progress text (else '')."""

    id: str
    kind: str
    job: str
    lane: str
    attempt: int
    text: str
    at_ms: int = 0  # a claim's server time, as its rate windows count it (0 on the other events)

    @property
    def time_ms(self) -> int:
        """The server time of the change: a claim's own, else the stream id's first part."""
        return self.at_ms or int(self.id.partition("-")[0])


def events_key(keys: Keyspace) -> str:
    return f"{keys.prefix}events"


def parse(entry_id: bytes | str, fields: dict[bytes, bytes]) -> Event:
    text = {k.decode(): v.decode(errors="replace") for k, v in fields.items()}
    return Event(
        entry_id.decode() if isinstance(entry_id, bytes) else entry_id,
        text.get("e", ""),
        text.get("j", ""),
        text.get("l", ""),
        int(text.get("a", "0") or 0),
        text.get("x", ""),
        int(text.get("t", "0") or 0),
    )


def cap_value(maxlen: int | None) -> int | None:
    return None if maxlen is None else check_int("maxlen", maxlen, 1, MAX_EVENTS)


async def set_events(bus: BusCore, maxlen: int | None) -> None:
    """Turn the stream on with about ``maxlen`` entries kept, or off (None; the stream is kept)."""
    cap = cap_value(maxlen)
    with translate_redis_errors():
        if cap is None:
            await bus.redis.hdel(bus.keys.stats, "events")
        else:
            await bus.redis.hset(bus.keys.stats, "events", cap)


def progress_call(keys: Keyspace, claim: Claim, text: object) -> tuple[list[str], list[Any]]:
    check_claim(claim)
    if not isinstance(text, str) or len(text) > MAX_PROGRESS:
        raise InvalidOption(f"a progress is text of at most {MAX_PROGRESS} characters, got {text!r:.60}")
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidOption("a progress is text UTF-8 can encode") from exc
    return (
        [keys.job(claim.job), keys.stats],
        [claim.job, claim.token, claim.request, text, keys.prefix],
    )


def published(reply: Any) -> bool:
    try:
        code = int(reply[0])
    except (TypeError, IndexError, ValueError) as exc:
        raise ScriptError(f"progress.lua answered {reply!r}") from exc
    return code == 1


async def progress(bus: BusCore, claim: Claim, text: str) -> bool:
    """Publish a progress event for the job ``claim`` holds; False when the claim no longer holds it or
    the stream is off (nothing published)."""
    keys, args = progress_call(bus.keys, claim, text)
    with translate_redis_errors():
        return published(await bus.scripts.run("progress", keys, args))


async def events(
    bus: BusCore, *, since: str = "0", follow: bool = False, block_ms: int = 5000, batch: int = 500
) -> AsyncIterator[Event]:
    """The events after ``since`` (a stream id; ``"0"`` the oldest kept, ``"$"`` only new ones), oldest
    first; with ``follow`` it waits for more (XREAD BLOCK ``block_ms`` at a time) until the caller stops."""
    check_int("block_ms", block_ms, 1, 600_000)
    check_int("batch", batch, 1, 10_000)
    key = events_key(bus.keys)
    last = since
    if last == "$":
        with translate_redis_errors():
            info: Any = await bus.redis.xrevrange(key, count=1)
        last = info[0][0].decode() if info else "0"
    while True:
        with translate_redis_errors():
            reply: Any = await bus.redis.xread({key: last}, count=batch, block=block_ms if follow else None)
        entries = reply[0][1] if reply else []
        for entry_id, fields in entries:
            event = parse(entry_id, fields)
            last = event.id
            yield event
        if not entries and not follow:
            return

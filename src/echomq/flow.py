"""Flow control: pause and resume a bus or a lane, cap a lane's concurrency, limit a lane's or the bus's
rate. Every gate is enforced inside the claim (``lua/claim.lua``) on the server clock, so any number of
workers, on any hosts, share one limit and nobody's clock decides it.

The gates:

* **Pause.** A paused bus claims nothing: active jobs run on and finish, the sweep still returns a dead
  worker's jobs to their lanes, producers still enqueue. A paused lane leaves the ring: its queued jobs
  wait, the other lanes are served as before. Resuming wakes the idle workers.
* **Lane concurrency cap** (what BullMQ Pro sells as groups): at most ``k`` jobs of the lane active at
  once, over every worker. The claim that brings a lane to its cap takes it out of the ring; the
  complete, fail, release, sweep or revoke that frees a place puts it back. ``lane="*"`` caps every lane
  that has no cap of its own.
* **Rate limit**: at most ``n`` claims in any window of ``per_ms`` (a sliding window on the server
  clock, exact: the claims of the window are kept, one member each). For a lane (``lane="*"``: every
  lane without its own), a lane whose window is full leaves the ring until its oldest claim leaves the
  window (the claim and the sweep put it back); for the bus, a claim stops when the window is full and
  tells the workers when it frees (its ``next_due``), so idle workers neither spin nor miss the moment.

Fairness holds among the open lanes: a gate takes a lane out of the rotation, and its return puts it at
the ring's end with its fairness lag starting then, so the bound of :mod:`echomq.lanes` (a lane waits at
most as many claims as there are lanes in the ring) holds for every lane that is open.

What a retry does: each change sets a value (``flow.lua``), so a retry after a lost reply changes
nothing more. What a claim counted against a rate stays counted: a claim whose reply was lost spent its
place in the window, as it spent a try.

Resharding: while the bus's slot moves between cluster nodes, a bus with any gate set claims nothing
(its gates' keys may be on either node); claims resume when the move ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq._validate import check_int
from echomq.errors import InvalidOption, ScriptError, translate_redis_errors
from echomq.keyspace import check_lane

if TYPE_CHECKING:
    from echomq.core import BusCore
    from echomq.keyspace import Keyspace

MAX_CAP = 100_000
MAX_RATE = 100_000  # claims a window keeps at most (one member each)
MAX_WINDOW_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` claims in any window of ``per_ms`` milliseconds (server clock)."""

    count: int
    per_ms: int

    def __post_init__(self) -> None:
        check_int("count", self.count, 1, MAX_RATE)
        check_int("per_ms", self.per_ms, 1, MAX_WINDOW_MS)

    def text(self) -> str:
        return f"{self.count}:{self.per_ms}"


@dataclass(frozen=True, slots=True)
class FlowSettings:
    """The flow-control settings of a bus, as read by :func:`read_flow`."""

    paused: bool
    paused_lanes: frozenset[str]
    caps: dict[str, int]  # lane (or '*') -> k
    rates: dict[str, Rate]  # lane (or '*') -> rate
    rate: Rate | None  # the bus's


def _target(lane: str | None, *, star: bool) -> str:
    if lane is None:
        return ""
    if star and lane == "*":
        return "*"
    return check_lane(lane)


Call = tuple[list[str], list[Any]]


def flow_call(keys: Keyspace, wake_cap: int, what: str, whose: str, value: str) -> Call:
    """Keys and args of one flow.lua call (its inputs checked by the callers below)."""
    return (
        [keys.flow, keys.stats, keys.ring, keys.waiting, keys.wake, keys.active],
        [keys.prefix, what, whose, value, wake_cap],
    )


def pause_call(keys: Keyspace, wake_cap: int, lane: str | None, *, resume: bool) -> Call:
    """Pause (or resume) the bus (``lane=None``) or one lane."""
    return flow_call(keys, wake_cap, "resume" if resume else "pause", _target(lane, star=False), "")


def cap_call(keys: Keyspace, wake_cap: int, lane: str, cap: int | None) -> Call:
    """Cap ``lane`` (``"*"``: every lane without its own) at ``cap`` active jobs; None clears it."""
    if lane is None:
        raise InvalidOption("a concurrency cap is for a lane, or '*' for every lane")
    value = "" if cap is None else str(check_int("cap", cap, 1, MAX_CAP))
    return flow_call(keys, wake_cap, "cap", _target(lane, star=True), value)


def rate_call(keys: Keyspace, wake_cap: int, lane: str | None, rate: Rate | None) -> Call:
    """Limit ``lane`` (``"*"``: every lane without its own; None: the bus) to ``rate``; None clears it."""
    if rate is not None and not isinstance(rate, Rate):
        raise InvalidOption(f"a rate is an echomq.Rate(count, per_ms), got {type(rate).__name__}")
    return flow_call(keys, wake_cap, "rate", _target(lane, star=True), "" if rate is None else rate.text())


def checked_reply(reply: Any) -> int:
    """The number of settings a flow.lua reply reports."""
    try:
        code, gates = int(reply[0]), int(reply[1])
    except (TypeError, IndexError, ValueError) as exc:
        raise ScriptError(f"flow.lua answered {reply!r}") from exc
    if code != 1:
        raise ScriptError(f"flow.lua answered {reply!r}")
    return gates


def settings_from(raw: dict[bytes, bytes]) -> FlowSettings:
    """Read the flow hash (``HGETALL``) into :class:`FlowSettings`."""
    paused, lanes, caps, rates, rate = False, set(), {}, {}, None
    for name_b, value_b in raw.items():
        name, value = name_b.decode(), value_b.decode()
        kind, _, lane = name.partition(":")
        if kind == "paused":
            if lane:
                lanes.add(lane)
            else:
                paused = True
        elif kind == "cap":
            caps[lane] = int(value)
        elif kind == "rate":
            count, _, per_ms = value.partition(":")
            if lane:
                rates[lane] = Rate(int(count), int(per_ms))
            else:
                rate = Rate(int(count), int(per_ms))
    return FlowSettings(paused, frozenset(lanes), caps, rates, rate)


async def run(bus: BusCore, call: Call) -> int:
    keys, args = call
    with translate_redis_errors():
        return checked_reply(await bus.scripts.run("flow", keys, args))


async def read_flow(bus: BusCore) -> FlowSettings:
    """The bus's flow-control settings now."""
    with translate_redis_errors():
        raw: dict[bytes, bytes] = await bus.redis.hgetall(bus.keys.flow)  # type: ignore[assignment]
    return settings_from(raw)

"""The stalled sweep: reclaim expired leases, promote due delayed jobs, trim finished rows.

Guarantees provided here:

* **No job is lost to a dead worker.** A job whose lease deadline passed (server clock) goes back to its
  lane at its mint position, or to ``dead`` when it had used its last try. A worker that was merely slow
  (stopped, partitioned, GC-paused) past its lease has lost the job: its later finish is refused as stale.
* **Clocks.** Only the Redis server's clock is read (TIME inside the script). Worker clocks never decide a
  lease, so a skewed worker clock cannot make a job expire early or late. What the sweep does assume is
  that the server clock does not jump: a server clock stepped forward by more than a lease reclaims
  live jobs early (they then run twice; the fenced finish still refuses the loser).
* **Idempotent, and safe to run anywhere.** Any number of processes may sweep at once; each job moves at
  most once because each step is a single script. With ``lock_ms`` > 0 the reclaim step runs at most
  once per period across all callers; promotion of due delayed jobs and trimming always run.
* **Trimming.** Each sweep trims up to ``limit`` done rows past the result ttl and ``limit`` dead rows
  past the dead ttl to tombstones (lock or no lock). It is the catch-up path, after a burst or on an
  idle bus: at any throughput the finishes themselves trim faster than they add (see
  :mod:`echomq.finish`), so the sweep's rate does not bound retention.
* **Recovery time.** A killed worker's job is claimable again once a sweep runs after its lease
  deadline; every report names the earliest deadline left (``next_lease_ms``), so a worker sweeps then
  (see :mod:`echomq.worker.fetcher` for the bound that gives).
* **Idle.** Each step first reads its set's head and stops there when nothing is due: a sweep of a bus
  with nothing due runs six commands in all (the call, TIME, four ZRANGE). Its report says when the
  next step is due: ``next_due_ms`` (promotion), ``next_lease_ms`` (reclaim), ``next_trim_ms`` (trim).
* **Wake-ups.** Every job the sweep moves to a lane (promoted or reclaimed) pushes one wake token, up to
  the bus's wake cap, so as many idle workers wake as those jobs can use, not just one.
* **A lost reply** is harmless: the sweep moved (and trimmed) what was due, and a retry (or the next
  sweep) finds it moved and does the rest, never moving a job or trimming a row twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echomq._validate import check_int
from echomq.errors import translate_redis_errors

if TYPE_CHECKING:
    from echomq.core import BusCore

DEFAULT_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class SweepReport:
    promoted: int
    reclaimed: int
    dead: int
    trimmed: int
    next_due_ms: int | None
    swept: bool  # False when another process held the sweep lock (promotion and trimming ran, not reclaim)
    server_ms: int = 0  # the server's clock when the sweep ran, to place the next times on a local clock
    next_lease_ms: int | None = None  # the earliest lease deadline left in active (None: active is empty)
    next_trim_ms: int | None = None  # when the oldest done or dead row passes its ttl (None: both empty)


def sweep_call(bus: BusCore, *, lock_ms: int = 0, limit: int = DEFAULT_LIMIT) -> tuple[list[str], list[Any]]:
    """Keys and args of one sweep.lua call, every input checked."""
    check_int("limit", limit, 1, 100_000)
    check_int("lock_ms", lock_ms, 0)
    keys = bus.keys
    settings = bus.settings
    return (
        [
            keys.active,
            keys.delayed,
            keys.done,
            keys.dead,
            keys.ring,
            keys.wake,
            keys.stats,
            keys.sweep_lock,
            keys.waiting,
        ],
        [
            keys.prefix,
            limit,
            lock_ms,
            settings.result_ttl_ms,
            settings.dedup_window_ms,
            settings.wake_cap,
            settings.dead_ttl_ms,
        ],
    )


def _time(ms: int) -> int | None:
    return None if ms < 0 else ms


def report_from_reply(reply: Any) -> SweepReport:
    """Read a sweep.lua reply."""
    promoted, reclaimed, dead, trimmed, next_due, swept, now, lease, trim = (int(x) for x in reply)
    return SweepReport(
        promoted, reclaimed, dead, trimmed, _time(next_due), swept == 1, now, _time(lease), _time(trim)
    )


async def sweep(bus: BusCore, *, lock_ms: int = 0, limit: int = DEFAULT_LIMIT) -> SweepReport:
    """Run one sweep. ``lock_ms`` = 0 forces it; > 0 takes the shared lock for that period.

    Lost reply: its moves happened (and it holds the lock); the retry reports only what it moves itself
    (promotions; with the lock held, no reclaim), so a report is never counted twice."""
    keys, args = sweep_call(bus, lock_ms=lock_ms, limit=limit)
    with translate_redis_errors():
        reply = await bus.scripts.run("sweep", keys, args)
    return report_from_reply(reply)

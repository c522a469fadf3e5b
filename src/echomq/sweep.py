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
* **Recovery time.** A killed worker's job is claimable again at most lease + sweep period after its
  last extension.
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
    server_ms: int = 0  # the server's clock when the sweep ran, to place next_due_ms on a local clock


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


def report_from_reply(reply: Any) -> SweepReport:
    """Read a sweep.lua reply."""
    promoted, reclaimed, dead, trimmed, next_due, swept, now = (int(x) for x in reply)
    due = None if next_due < 0 else next_due
    return SweepReport(promoted, reclaimed, dead, trimmed, due, swept == 1, now)


async def sweep(bus: BusCore, *, lock_ms: int = 0, limit: int = DEFAULT_LIMIT) -> SweepReport:
    """Run one sweep. ``lock_ms`` = 0 forces it; > 0 takes the shared lock for that period.

    Lost reply: its moves happened (and it holds the lock); the retry reports only what it moves itself
    (promotions; with the lock held, no reclaim), so a report is never counted twice."""
    keys, args = sweep_call(bus, lock_ms=lock_ms, limit=limit)
    with translate_redis_errors():
        reply = await bus.scripts.run("sweep", keys, args)
    return report_from_reply(reply)

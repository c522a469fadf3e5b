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
  most once because each step is a single script. With ``lock_ms`` > 0 the reclaim and trim steps run at
  most once per period across all callers (promotion of due delayed jobs always runs).
* **Recovery time.** A killed worker's job is claimable again at most lease + sweep period after its
  last extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from echomq._validate import check_int
from echomq.errors import translate_redis_errors

if TYPE_CHECKING:
    from echomq.bus import Bus

DEFAULT_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class SweepReport:
    promoted: int
    reclaimed: int
    dead: int
    trimmed: int
    next_due_ms: int | None
    swept: bool  # False when another process held the sweep lock (only promotion ran)


async def sweep(bus: Bus, *, lock_ms: int = 0, limit: int = DEFAULT_LIMIT) -> SweepReport:
    """Run one sweep. ``lock_ms`` = 0 forces it; > 0 takes the shared lock for that period."""
    check_int("limit", limit, 1, 100_000)
    check_int("lock_ms", lock_ms, 0)
    keys = bus.keys
    settings = bus.settings
    with translate_redis_errors():
        reply = await bus.scripts.run(
            "sweep",
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
    promoted, reclaimed, dead, trimmed, next_due, swept = (int(x) for x in reply)
    return SweepReport(promoted, reclaimed, dead, trimmed, None if next_due < 0 else next_due, swept == 1)

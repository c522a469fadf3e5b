"""The conformance run with EchoMQ's flow control and tasks by name on (``--flow``).

* **Gates.** Every lane is capped at one active job (``set_lane_cap("*", 1)``: a player's guesses run
  one at a time, whatever the number of workers) and the bus at ``flow_rate`` claims in any second
  (``set_rate_limit``), both enforced inside the claim on the server clock; the events stream is on.
  The check replays the stream (:func:`echomq.testing.gates.replay`): at no instant were two jobs of one
  lane active, and no window of a second held more claims than the rate, across crashes, pauses, cuts
  and restarts.
* **Tasks by name.** The same worker processes also serve a named task (``conformance.square``) through
  an :class:`echomq.tasks.Tasks` registry: the run sends ``tasks`` of them on their own lanes while the
  players play, then waits for each result with ``bus.result`` (no polling): every one must come back
  once, with its value, beside the game's guesses.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from codemojex.conformance.schedule import Config
from echomq import Bus, JobDead, Rate, RedisUnavailable, ResultTimeout
from echomq.tasks import Tasks
from echomq.testing.gates import replay

EVENTS_CAP = 2_000_000  # every event of a run is kept, so the replay sees them all
TASK_LANES = 4
WINDOW_MS = 1000

TASKS = Tasks(lane="conformance.tasks")


@TASKS.task("conformance.square")
async def square(n: int) -> int:
    return n * n


def is_task(payload: bytes) -> bool:
    """A task message (the worker routes it to :data:`TASKS`), not a guess."""
    return payload.startswith(b'{"task":')


async def switch_on(bus: Bus, config: Config) -> None:
    """The gates and the events of a ``--flow`` run, before any player plays."""
    await bus.set_events(EVENTS_CAP)
    await bus.set_lane_cap("*", 1)
    await bus.set_rate_limit(Rate(config.flow_rate, WINDOW_MS))


@dataclass
class NamedTasks:
    """The named tasks a ``--flow`` run sends, and what came back."""

    count: int
    sent: dict[str, int] = field(default_factory=dict)  # job -> n
    problems: list[str] = field(default_factory=list)

    async def send(self, bus: Bus, pace_s: float) -> None:
        """Send ``count`` square tasks, ``pace_s`` apart, each retried with its own id until admitted."""
        task = TASKS["conformance.square"]
        for n in range(self.count):
            job = None
            for _ in range(100):
                try:
                    sent = await task.enqueue_with(
                        bus, (n,), job=job, lane=f"conformance.tasks.{n % TASK_LANES}"
                    )
                except RedisUnavailable:
                    await asyncio.sleep(0.2)  # a fault: the same id again (an idempotent send)
                    continue
                job = sent.job
                self.sent[job] = n
                break
            await asyncio.sleep(pace_s)

    async def collect(self, bus: Bus, timeout_s: float) -> int:
        """Wait for every result; the number that came back right (the rest are problems)."""
        task, right = TASKS["conformance.square"], 0
        for job, n in self.sent.items():
            try:
                value = await task.result(bus, job, timeout=timeout_s)
            except (JobDead, ResultTimeout, RedisUnavailable) as exc:
                self.problems.append(f"named task {job} ({n}): {type(exc).__name__} {exc}")
                continue
            if value == n * n:
                right += 1
            else:
                self.problems.append(f"named task {job} ({n}) came back {value!r}, not {n * n}")
        if len(self.sent) < self.count:
            self.problems.append(f"only {len(self.sent)} of {self.count} named tasks could be sent")
        return right


async def check(
    bus: Bus, config: Config, tasks: NamedTasks, tasks_right: int
) -> tuple[list[str], dict[str, Any]]:
    """The gates replayed from the events stream, and the named tasks: violations and figures."""
    report = replay([event async for event in bus.events()], WINDOW_MS)
    violations = list(tasks.problems)
    if report.most_active > 1:
        violations.append(
            f"lane {report.most_active_lane} had {report.most_active} jobs active at once (cap 1)"
        )
    if report.most_in_window > config.flow_rate:
        violations.append(
            f"{report.most_in_window} claims in one window of a second (rate {config.flow_rate})"
        )
    figures = {
        "claims_seen": report.claims,
        "most_active_in_a_lane": report.most_active,
        "most_claims_in_a_second": report.most_in_window,
        "rate": config.flow_rate,
        "tasks_sent": len(tasks.sent),
        "tasks_right": tasks_right,
    }
    return violations, figures

"""The flow gates checked from the events stream (:mod:`echomq.events`): a lane cap and a rate window,
as the conformance suite and the tests verify them after a run. Each script writes its event in the
same step as its change, in order, so replaying the stream replays the state of ``active`` per lane."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

from echomq.events import Event

# Events of a job leaving active (its claim's run is over), and of a claim entering it.
LEFT_ACTIVE = frozenset({"completed", "retrying", "dead", "released", "revoked", "reclaimed"})


@dataclass(frozen=True, slots=True)
class GateReport:
    """The most jobs of one lane active at once, and the most claims in one window, over the events."""

    most_active: int
    most_active_lane: str
    most_in_window: int
    claims: int


def replay(events: Iterable[Event], window_ms: int) -> GateReport:
    """Replay ``events`` (in stream order): per lane, the active jobs at every instant; over the bus, the
    claims in every window ``(t - window_ms, t]`` of a claim's server time ``t`` (the rate windows')."""
    active: Counter[str] = Counter()
    holding: dict[str, str] = {}  # job -> lane while active
    most, most_lane = 0, ""
    recent: deque[int] = deque()
    most_in_window = claims = 0
    for event in events:
        if event.kind == "claimed":
            claims += 1
            holding[event.job] = event.lane
            active[event.lane] += 1
            if active[event.lane] > most:
                most, most_lane = active[event.lane], event.lane
            recent.append(event.time_ms)
            while recent and recent[0] <= event.time_ms - window_ms:
                recent.popleft()
            most_in_window = max(most_in_window, len(recent))
        elif event.kind in LEFT_ACTIVE and event.job in holding:
            active[holding.pop(event.job)] -= 1
    return GateReport(most, most_lane, most_in_window, claims)

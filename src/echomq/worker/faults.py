"""Named fault points for the conformance suite, armed only by an environment variable (tests, never a
normal run). Unset, a check is one dictionary lookup and false.

``ECHOMQ_FAULTS`` is a comma-separated list of ``point`` or ``point@probability`` (``@1`` is implied):
``worker.after_claim@0.01,worker.before_ack@0.02`` kills the worker in about 1 % of its claims and 2 % of
its acknowledgements. ``ECHOMQ_FAULTS_SEED`` seeds the draws (else they differ per process). A point fires
by killing its own process with SIGKILL: no clean-up, no finally blocks, no goodbye to Redis.

Points of the worker's job cycle (:mod:`echomq.worker.fetcher`, :mod:`echomq.worker.processor`,
:mod:`echomq.worker.lease_keeper`):

``worker.after_claim``
    a claim's reply arrived (the jobs are active under this worker's tokens), before any handler runs.
``worker.mid_handler``
    the handler has started (an async one ran to its first suspension), before it returns.
``worker.before_ack``
    the handler returned (its effect, if it has one, is done), before the fenced complete is sent.
``worker.mid_extend``
    a batch of lease extensions was applied by Redis, before the worker read the replies.

``ECHOMQ_CLOCK_SKEW_MS`` (an int, may be negative) shifts this process's wall clock as :mod:`echomq.ids`
sees it (the only use of the local clock: leases, deadlines and finish times are the Redis server's).
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass

ENV = "ECHOMQ_FAULTS"
SEED_ENV = "ECHOMQ_FAULTS_SEED"
SKEW_ENV = "ECHOMQ_CLOCK_SKEW_MS"
POINTS = frozenset({"worker.after_claim", "worker.mid_handler", "worker.before_ack", "worker.mid_extend"})


@dataclass(frozen=True, slots=True)
class Armed:
    """The parsed value of a faults variable: point -> probability."""

    points: dict[str, float]


def parse(text: str, known: frozenset[str]) -> Armed:
    """``point[@p],...`` -> :class:`Armed`; an unknown point or a probability outside [0, 1] raises
    ``ValueError`` (a typo in a fault schedule must not silently test nothing)."""
    points: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, chance = item.partition("@")
        if name not in known:
            raise ValueError(f"no fault point named {name!r} (known: {', '.join(sorted(known))})")
        probability = float(chance) if chance else 1.0
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"a fault probability is in [0, 1], got {chance!r} for {name}")
        points[name] = probability
    return Armed(points)


class Faults:
    """The points of one variable, parsed once per value it takes, drawn from one random stream."""

    def __init__(self, env: str, known: frozenset[str], seed_env: str = SEED_ENV) -> None:
        self.env = env
        self.known = known
        self.seed_env = seed_env
        self._text: str | None = None
        self._armed = Armed({})
        self._random = random.Random()

    def _current(self) -> Armed:
        text = os.environ.get(self.env, "")
        if text != self._text:
            self._armed = parse(text, self.known)
            seed = os.environ.get(self.seed_env)
            self._random = random.Random(f"{seed}:{os.getpid()}" if seed else None)
            self._text = text
        return self._armed

    def armed(self, point: str) -> bool:
        """True if ``point`` is listed (whatever its probability)."""
        if point not in self.known:
            raise KeyError(f"no fault point named {point!r}")
        return point in self._current().points

    def fires(self, point: str) -> bool:
        """True if ``point`` is listed and this draw falls within its probability."""
        if not os.environ.get(self.env):
            if point not in self.known:
                raise KeyError(f"no fault point named {point!r}")
            return False
        probability = self._current().points.get(point, 0.0) if self.armed(point) else 0.0
        return probability > 0.0 and self._random.random() < probability


WORKER = Faults(ENV, POINTS)


def crash() -> None:
    """Die now, as a SIGKILL does."""
    os.kill(os.getpid(), signal.SIGKILL)


def at(point: str) -> None:
    """Crash here if ``point`` fires (the call the runtime makes at each of its fault points)."""
    if WORKER.fires(point):
        crash()


def skew_ms() -> int:
    """The test clock skew of this process, in ms (0 unless ``ECHOMQ_CLOCK_SKEW_MS`` is set)."""
    text = os.environ.get(SKEW_ENV)
    return int(text) if text else 0

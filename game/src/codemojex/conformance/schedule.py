"""What a conformance run is told: its :class:`Config` (how many players, guesses and workers, which fault
kinds at what pace, the settings of every process of the run), validated when made.

The game settings every run opens its round with are :data:`SETTINGS`, and every Redis client of the run
is made from a URL that carries the run's socket timeout (:func:`with_socket_timeout`).
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.conformance import KINDS
from codemojex.game import GameSettings
from echomq import Settings


@dataclass(frozen=True, slots=True)
class Config:
    guesses: int = 2000
    players: int = 20
    workers: int = 3
    concurrency: int = 8
    appendfsync: str = "always"  # of the Redis the harness starts: always | everysec
    fault_every_s: float = 0.4  # the injector's pace
    boundary_rate: float = 0.01  # chance a worker kills itself at each armed boundary it crosses
    duplicate_rate: float = 0.1  # share of answered guesses submitted again on purpose
    lease_ms: int = 1000
    seed: int = 1
    kinds: tuple[str, ...] = KINDS
    redis_url: str | None = None  # a Redis of the user's own: no Redis crashes
    tag: str = "conformance"
    drain_timeout_s: float = 180.0
    http_share: float = 0.25  # of the players submit over HTTP to a web host process, with Idempotency-Key
    cluster: bool = False  # on a 3-master cluster of the harness's own, the bus's slot resharded meanwhile
    # (kinds: ``failover`` there fails the slot's master over too, with durable admission on)
    max_attempts: int = 25  # of each guess job (1 makes a try spent without a handler run a dead letter)
    socket_timeout_s: float = 1.0  # of every Redis client of the players, host and workers; pause: 1.5x
    sweep_every_s: float = 0.3  # the workers' sweep period (the library's default is 10 s)
    fail_rate: float = 0.02  # share of first deliveries whose handler fails (a retry with backoff)
    backoff_base_ms: int = 400  # the bus's first retry delay (before jitter)
    result_ttl_ms: int | None = None  # the bus's settings (None: the library's default)
    dedup_window_ms: int | None = None
    memory_window_ms: int = 3000  # rows past their TTL may be at most this much of the completions
    memory_slack: int = 200  # ... plus this many
    quiet: bool = True  # the quiet phase after the drain (punctuality with idle workers)
    # EchoMQ's flow control and tasks by name on (codemojex.conformance.flow): every lane capped at one
    # active job, the bus at flow_rate claims a second, the events checked, named tasks sent meanwhile
    flow: bool = False
    flow_rate: int = 400
    tasks: int = 60

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        if self.appendfsync not in ("always", "everysec"):
            raise ValueError("appendfsync is always or everysec")
        if self.cluster and self.redis_url:
            raise ValueError("the cluster schedule starts a cluster of its own: give no Redis URL")
        if not 0.0 <= self.http_share <= 1.0:
            raise ValueError("http_share is in [0, 1]")
        for name in ("guesses", "players", "workers", "concurrency", "lease_ms", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is at least 1")
        if not 0.0 <= self.fail_rate <= 1.0:
            raise ValueError("fail_rate is in [0, 1]")
        if self.flow and (self.flow_rate < 1 or self.tasks < 0):
            raise ValueError("flow_rate is at least 1 and tasks at least 0")
        if self.socket_timeout_s <= 0 or self.sweep_every_s <= 0:
            raise ValueError("socket_timeout_s and sweep_every_s are positive")

    @property
    def wait_replicas(self) -> int:
        """Durable admission under ``failover`` (:mod:`.cluster`): a guess acknowledged is on the replica.
        A fault of the cluster schedule only: on one server (no replica) the kind is left out."""
        return 1 if self.cluster and "failover" in self.kinds else 0

    def bus_settings(self) -> Settings:
        given = {"result_ttl_ms": self.result_ttl_ms, "dedup_window_ms": self.dedup_window_ms}
        return Settings(
            backoff_base_ms=self.backoff_base_ms,
            wait_replicas=self.wait_replicas,
            **{k: v for k, v in given.items() if v is not None},
        )


SETTINGS = GameSettings(max_queued=1_000_000, max_attempts=25, events_cap=1_000_000)


def with_socket_timeout(url: str, seconds: float) -> str:
    """``url`` with redis-py's ``socket_timeout`` query option (every client made from it gets it)."""
    return f"{url}{'&' if '?' in url else '?'}socket_timeout={seconds}"

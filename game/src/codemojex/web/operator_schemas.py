"""The typed 2xx bodies of the operator's routes (``/api/operator/*``: rounds closed, queue stats,
leases, dead letters, refunds, throughput) and of the proof page's (``/api/proof/*``); the rules are
:mod:`codemojex.web.schemas`'s (extra fields forbidden)."""

from __future__ import annotations

from pydantic import Field

from codemojex.web.schemas import GuessOut, PriceOut, Shape


class ClosedOut(Shape):
    round_id: str
    closed_ms: int


class LaneOut(Shape):
    lane: str
    depth: int
    lag: int


class DepthOut(Shape):
    queued: int
    delayed: int
    active: int
    done: int
    dead: int


class StatsOut(Shape):
    counters: dict[str, int]
    depth: DepthOut
    lanes_total: int
    lanes: list[LaneOut]
    lag_max: int
    server_ms: int
    tag: str


class LeaseOut(Shape):
    job_id: str
    lane: str
    deadline_ms: int
    attempts: int
    owner: str


class LeasesOut(Shape):
    server_ms: int
    leases: list[LeaseOut]


class DeadJobOut(Shape):
    job_id: str
    lane: str
    dead_ms: int
    tries: int
    error: str


class DeadOut(Shape):
    dead: list[DeadJobOut]


class RetriedOut(Shape):
    job_id: str
    retried: bool


class RefundOut(Shape):
    job_id: str
    outcome: str = Field(description="refunded, already, not_dead, scored or uncharged")
    refunded: PriceOut | None


class SampleOut(Shape):
    at_ms: int
    admitted: int
    completed: int


class ThroughputOut(Shape):
    interval_s: float
    samples: list[SampleOut]


class ProofWorkerOut(Shape):
    instance: str = Field(description="an opaque tag of the demo worker process: it changes on a restart")
    alive: bool
    pid: int | None = Field(default=None, description="the operator token only")
    restarts: int | None = Field(default=None, description="the operator token only")


class ProofCapsOut(Shape):
    per_caller: int
    total: int


class ProofStatusOut(Shape):
    enabled: bool
    crash: bool
    tag: str | None = Field(description="the demonstration bus's tag")
    round_id: str | None = Field(description="the open demonstration round")
    caps: ProofCapsOut
    worker: ProofWorkerOut | None


class ProofJobsOut(Shape):
    round_id: str | None
    guesses: list[GuessOut]
    balances: dict[str, int] = Field(description="the demo wallet: worthless proof currency")


class StaleOut(Shape):
    job_id: str
    token_used: int
    token_current: int
    outcome: str = Field(description="the fenced finish's answer: stale when the old token is refused")
    state: str

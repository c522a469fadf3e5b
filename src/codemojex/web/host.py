"""The host's configuration and its running state (one :class:`Host` per app, on ``app.state.host``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from codemojex.game import Game, GameSettings

if TYPE_CHECKING:
    from codemojex.web.hub import Hub
    from codemojex.web.throughput import Sampler

BODY_LIMIT = 8 * 1024  # bytes: a guess, a name or an operator's round options fit many times over


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """What the proof page shows of the score worker process that ``codemojex serve`` supervises."""

    pid: int | None
    restarts: int
    alive: bool


@dataclass(frozen=True, slots=True)
class HostConfig:
    """How to build the app. ``operator_token`` guards the operator endpoints (None: they answer 403).
    ``proof`` turns on the proof endpoints, whose crash button kills a worker process armed for it;
    ``worker_status`` reports that process (given by :mod:`codemojex.serve`). ``rounds_by_worker``: the
    operator's open and close go to the score worker as jobs (:mod:`codemojex.round_jobs`), for a host
    whose Redis user may not touch secrets (:mod:`codemojex.access`)."""

    redis_url: str
    tag: str = "cm"
    cluster: bool = False
    operator_token: str | None = None
    proof: bool = False
    worker_status: Callable[[], WorkerStatus | None] | None = None
    settings: GameSettings = field(default_factory=GameSettings)
    body_limit: int = BODY_LIMIT
    sample_every_s: float = 5.0  # the dashboard's throughput samples
    max_connections: int = 200
    rounds_by_worker: bool = False


@dataclass(slots=True)
class Host:
    config: HostConfig
    game: Game
    hub: Hub
    sampler: Sampler


def host_of(request: Request) -> Host:
    host: Host = request.app.state.host
    return host

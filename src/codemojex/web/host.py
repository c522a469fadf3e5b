"""The host's configuration and its running state (one :class:`Host` per app, on ``app.state.host``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from codemojex.game import Game, GameSettings
from codemojex.proof import CALLER_CAP, TOTAL_CAP
from codemojex.supervisor import WorkerStatus
from codemojex.web.admission import Limits
from echomq import Settings

if TYPE_CHECKING:
    from codemojex.web.hub import Hub
    from codemojex.web.throughput import Sampler

BODY_LIMIT = 8 * 1024  # bytes: a guess, a name or an operator's round options fit many times over


@dataclass(frozen=True, slots=True)
class HostConfig:
    """How to build the app. ``operator_token`` guards the operator endpoints (None: they answer 403).
    ``proof`` turns on the proof endpoints, on the demo game of :mod:`codemojex.proof` (never the real
    one); ``proof_crash`` their crash button, which kills the demo worker (armed for it by ``codemojex
    serve --proof-crash``); ``worker_status`` reports that demo worker (given by :mod:`codemojex.serve`).
    ``proof_caller_cap`` / ``proof_total_cap``: demo jobs pending per caller / in total (then 429).
    ``limits`` are the admission limits (rate, in flight, streams, timeouts:
    :class:`~codemojex.web.admission.Limits`). ``rounds_by_worker``: the operator's open and close go to
    the score worker as jobs (:mod:`codemojex.round_jobs`), for a host whose Redis user may not touch
    secrets (:mod:`codemojex.access`). ``bus_settings``: the game bus's (None: the library's defaults);
    with ``wait_replicas`` a guess is answered 202 only once that many replicas hold it (else 503
    ``unavailable``; :mod:`codemojex.game`, "Failover")."""

    redis_url: str
    tag: str = "cm"
    cluster: bool = False
    operator_token: str | None = None
    proof: bool = False
    proof_crash: bool = False
    proof_caller_cap: int = CALLER_CAP
    proof_total_cap: int = TOTAL_CAP
    worker_status: Callable[[], WorkerStatus | None] | None = None
    settings: GameSettings = field(default_factory=GameSettings)
    body_limit: int = BODY_LIMIT
    sample_every_s: float = 5.0  # the dashboard's throughput samples
    max_connections: int = 200
    limits: Limits = field(default_factory=Limits)  # admission control (codemojex.web.admission)
    rounds_by_worker: bool = False
    bus_settings: Settings | None = None


@dataclass(slots=True)
class Host:
    config: HostConfig
    game: Game
    hub: Hub
    sampler: Sampler
    demo: Game | None = None  # the proof's demo game (codemojex.proof), when the proof is on


def host_of(request: Request) -> Host:
    host: Host = request.app.state.host
    return host

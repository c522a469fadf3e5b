"""The host's configuration and its running state (one :class:`Host` per app, on ``app.state.host``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from codemojex import placement, players, recovery
from codemojex.errors import InvalidInput
from codemojex.game import Game, GameSettings, check_int, translate_errors
from codemojex.keys import PLAYER
from codemojex.proof import CALLER_CAP, TOTAL_CAP
from codemojex.supervisor import WorkerStatus
from codemojex.web.admission_limits import Limits
from echomq import Settings
from echomq.partitions import MAX_PARTITIONS, partition_of

if TYPE_CHECKING:
    from codemojex.spread import SpreadGame
    from codemojex.web.hub import Hub
    from codemojex.web.throughput import Sampler

BODY_LIMIT = 8 * 1024  # bytes: a guess, a name or an operator's round options fit many times over


@dataclass(frozen=True, slots=True)
class HostConfig:
    """How to build the app. ``operator_token`` guards the operator endpoints (None: they answer 403).
    ``proof`` turns on the proof endpoints, on the demo game of :mod:`codemojex.proof` (never the real
    one); ``proof_crash`` their crash button, which kills the demo worker (armed for it by ``codemojex
    serve --proof-crash``); ``worker_status`` reports that demo worker (given by :mod:`codemojex.serve`).
    ``partitions``: P > 1 serves one game spread over P partitions (:mod:`codemojex.spread`; the README's
    "Scaling out"): a player's routes go to their partition, found from their token alone.
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
    partitions: int = 1

    def __post_init__(self) -> None:
        check_int("partitions", self.partitions, 1, MAX_PARTITIONS)


@dataclass(slots=True)
class Host:
    """What the routes share. ``game`` is the home game: one game's, or a spread game's partition 0,
    which keeps what is not a player's (the lobby's round listings, history and summaries, the round
    settings, stream tickets, the anonymous routes' address buckets). A player's data is in
    :meth:`game_of` their id (or of their token, :meth:`game_of_token`)."""

    config: HostConfig
    game: Game
    hub: Hub
    sampler: Sampler
    demo: Game | None = None  # the proof's demo game (codemojex.proof), when the proof is on
    spread: SpreadGame | None = None

    @property
    def games(self) -> list[Game]:
        """Every partition's game (the home game alone when not spread)."""
        return [self.game] if self.spread is None else self.spread.games

    def game_of(self, player_id: str) -> Game:
        """The game holding ``player_id``'s data (their lane's partition)."""
        return self.game if self.spread is None else self.spread.game_of(player_id)

    def game_of_digest(self, digest: str) -> Game:
        """The game holding the token (or code) whose SHA-256 hex is ``digest`` (codemojex.placement)."""
        games = self.games
        return games[placement.partition_of_digest(digest, len(games))]

    def game_of_token(self, token: str | None) -> Game:
        """The game of a bearer token's player; the home game for text that cannot be a token (it
        names nobody there either)."""
        if self.spread is None or token is None:
            return self.game
        try:
            return self.game_of_digest(players.token_digest(players.check_token(token)))
        except InvalidInput:
            return self.game

    def game_of_code(self, code: str) -> Game:
        """The game holding the player a recovery code names (InvalidOption: not a code)."""
        return self.game if self.spread is None else self.game_of_digest(recovery.code_digest(code))

    async def game_of_job(self, job_id: str) -> Game:
        """The game whose bus holds ``job_id`` (each partition asked; UnknownJob if none has it)."""
        if self.spread is None:
            return self.game
        with translate_errors():
            info = await self.spread.pbus.inspect(job_id)
        return self.game_of_lane(info.lane)

    def game_of_lane(self, lane: str) -> Game:
        """The game of a bus lane: a player's lane is theirs; other lanes are the home game's."""
        if self.spread is None or not lane.startswith(PLAYER):
            return self.game
        return self.games[partition_of(lane, len(self.games))]


def host_of(request: Request) -> Host:
    host: Host = request.app.state.host
    return host

"""The operator's API (``Authorization: Bearer <operator token>``): open and close rounds, queue stats,
active leases, dead letters, their retry and refund, and the throughput samples the dashboard charts.

Opening and closing a round touch its secret: with ``rounds_by_worker`` (a host on its least-privilege
Redis user, :mod:`codemojex.access`) the score worker runs them (:mod:`codemojex.round_jobs`).

On a spread game (:mod:`codemojex.spread`) a round opens and closes in every partition, the stats are
every partition's summed, and the leases and dead letters are every partition's, merged in order."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from codemojex import refunds, round_jobs, rounds, spread, spread_jobs
from codemojex.errors import UnknownJob
from codemojex.game import Game, translate_errors
from codemojex.keys import JOB, ROUND, check_id
from codemojex.web import operator_schemas, schemas, views
from codemojex.web.auth import Operator
from codemojex.web.host import host_of
from codemojex.web.problems import answers
from echomq import rows as bus_rows

router = APIRouter(
    prefix="/api/operator", dependencies=[Operator], tags=["operator"], responses=answers(401, 403)
)


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")
    currency: str = Field(max_length=16)
    amount: int


class OpenRound(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int | None = Field(default=None, description="a random keyboard of this many emoji (2-32)")
    keyboard: list[str] | None = Field(default=None, max_length=32, description="the keyboard's emoji")
    prices: list[Price] | None = Field(default=None, max_length=8, description="in order of preference")
    delay_s: float = 0
    duration_s: float | None = None
    max_guesses: int | None = None


async def _now(request: Request) -> int:
    return await rounds.server_ms(host_of(request).game)


@router.post("/rounds", status_code=201, response_model=schemas.RoundOut, responses=answers(400, 413, 422))
async def open_round(request: Request, spec: OpenRound) -> dict[str, Any]:
    """A new round with a fresh secret drawn with a CSPRNG."""
    host = host_of(request)
    prices = None if spec.prices is None else [(p.currency, p.amount) for p in spec.prices]
    if host.spread is not None:  # every partition (by the worker: codemojex.spread_jobs)
        spread_opener = spread_jobs.open_round if host.config.rounds_by_worker else spread.open_round
        the_round = await spread_opener(
            host.spread, keyboard=spec.keyboard, size=spec.size, prices=prices, delay_s=spec.delay_s,
            duration_s=spec.duration_s, max_guesses=spec.max_guesses,
        )  # fmt: skip
        return views.round_view(the_round, await _now(request))
    opener = round_jobs.open_round if host.config.rounds_by_worker else rounds.open_round
    the_round = await opener(
        host.game,
        keyboard=spec.keyboard,
        size=spec.size,
        prices=prices,
        delay_s=spec.delay_s,
        duration_s=spec.duration_s,
        max_guesses=spec.max_guesses,
    )
    return views.round_view(the_round, await _now(request))


@router.post(
    "/rounds/{round_id}/close", response_model=operator_schemas.ClosedOut, responses=answers(400, 404)
)
async def close_round(request: Request, round_id: str) -> dict[str, Any]:
    host = host_of(request)
    if host.spread is not None:
        spread_closer = spread_jobs.close_round if host.config.rounds_by_worker else spread.close_round
        closed = await spread_closer(host.spread, check_id(round_id, ROUND))
        return {"round_id": round_id, "closed_ms": closed}
    closer = round_jobs.close_round if host.config.rounds_by_worker else rounds.close_round
    closed = await closer(host.game, round_id)
    return {"round_id": round_id, "closed_ms": closed}


@router.get("/stats", response_model=operator_schemas.StatsOut, responses=answers(422))
async def stats(request: Request, lanes: Annotated[int, Query(ge=0, le=1000)] = 50) -> dict[str, Any]:
    """Counters, depth per state, and the first ``lanes`` lanes with their depth and fairness lag."""
    host = host_of(request)
    bus = host.game.bus if host.spread is None else host.spread.pbus
    with translate_errors():
        read = await bus.stats(lanes=lanes)
    return read.as_dict() | {"server_ms": await _now(request), "tag": bus.tag}


@router.get("/leases", response_model=operator_schemas.LeasesOut, responses=answers(422))
async def leases(request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """The active jobs with the soonest lease deadlines first."""
    found = [lease for game in host_of(request).games for lease in await _leases(game, limit)]
    found.sort(key=lambda lease: (lease["deadline_ms"], lease["job_id"]))
    return {"server_ms": await _now(request), "leases": found[:limit]}


async def _leases(game: Game, limit: int) -> list[dict[str, Any]]:
    with translate_errors():
        active = await game.redis.zrange(game.bus.keys.active, 0, limit - 1, withscores=True)
        async with game.redis.pipeline(transaction=False) as pipe:
            for raw, _ in active:
                pipe.hmget(game.bus.keys.job(raw.decode()), bus_rows.LANE, bus_rows.ATTEMPTS, bus_rows.OWNER)
            rows = await pipe.execute()
    return [
        {
            "job_id": raw.decode(),
            "lane": (lane or b"").decode(),
            "deadline_ms": int(deadline),
            "attempts": int(attempts or 0),
            "owner": (owner or b"").decode(),
        }
        for (raw, deadline), (lane, attempts, owner) in zip(active, rows, strict=True)
    ]


@router.get("/dead", response_model=operator_schemas.DeadOut, responses=answers(422))
async def dead(request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """Dead-lettered jobs, oldest first, with their last error."""
    found = [row for game in host_of(request).games for row in await _dead(game, limit)]
    found.sort(key=lambda row: (row["dead_ms"], row["job_id"]))
    return {"dead": found[:limit]}


async def _dead(game: Game, limit: int) -> list[dict[str, Any]]:
    with translate_errors():
        listed = await game.bus.dead_jobs(limit)
        async with game.redis.pipeline(transaction=False) as pipe:
            for job, _ in listed:
                pipe.hmget(game.bus.keys.job(job), bus_rows.LANE, bus_rows.TRIES, bus_rows.ERROR)
            rows = await pipe.execute()
    return [
        {
            "job_id": job,
            "lane": (lane or b"").decode(),
            "dead_ms": at,
            "tries": int(tries or 0),
            "error": (error or b"").decode("utf-8", "replace"),
        }
        for (job, at), (lane, tries, error) in zip(listed, rows, strict=True)
    ]


@router.post("/dead/{job_id}/retry", response_model=operator_schemas.RetriedOut, responses=answers(400))
async def retry(request: Request, job_id: str) -> dict[str, Any]:
    """Move a dead job back to its lane (its tries start again); ``retried`` is false if it was not dead."""
    check_id(job_id, JOB)
    host = host_of(request)
    with translate_errors():
        retried = await (host.game.bus if host.spread is None else host.spread.pbus).retry_dead(job_id)
    return {"job_id": job_id, "retried": retried}


@router.post("/dead/{job_id}/refund", response_model=operator_schemas.RefundOut, responses=answers(400))
async def refund(request: Request, job_id: str) -> dict[str, Any]:
    """Give a dead guess its payment back, once (:mod:`codemojex.refunds`): ``outcome`` is refunded, or
    already, not_dead, scored or uncharged when nothing changed. Safe to repeat (a lost reply: ask again)."""
    check_id(job_id, JOB)
    try:
        game = await host_of(request).game_of_job(job_id)  # the job's partition
    except UnknownJob:
        game = host_of(request).game  # no partition has it: refund answers as for any unknown job
    [result] = await refunds.refund(game, [job_id])
    charged = {"currency": result.charge[0], "amount": result.charge[1]} if result.charge else None
    return {"job_id": job_id, "outcome": result.outcome.value, "refunded": charged}


@router.get("/throughput", response_model=operator_schemas.ThroughputOut)
async def throughput(request: Request) -> dict[str, Any]:
    sampler = host_of(request).sampler
    return {
        "interval_s": sampler.every_s,
        "samples": [
            {"at_ms": s.at_ms, "admitted": s.admitted, "completed": s.completed} for s in sampler.samples
        ],
    }

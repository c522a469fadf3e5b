"""The player's API: rounds, guesses, locks, leaderboard, and where a guess job is (the account's own
routes, join, me, stats and wallet, are :mod:`codemojex.web.account_api`).

Every route but the round reads takes ``Authorization: Bearer <token>``.
A guess is admitted by :func:`codemojex.guesses.submit` (validate, overlay locks, charge, enqueue in one
script); a refusal is answered with its status (:data:`codemojex.web.problems.REFUSAL_STATUS`) and
changed nothing.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from codemojex import guesses, leaderboard, locks, rounds, spread
from codemojex.emoji import graphemes
from codemojex.errors import InvalidInput, NotFound, NotProven, RoundClosed, UnknownJob
from codemojex.game import Game, translate_errors
from codemojex.keys import JOB, ROUND, check_id, guess_of
from codemojex.rounds import RoundStatus
from codemojex.web import idempotency, schemas, views
from codemojex.web.auth import EitherToken, PlayerId, bearer, is_operator, player_of
from codemojex.web.host import host_of
from codemojex.web.problems import REFUSAL_STATUS, Problem, answers
from echomq import JobInfo

router = APIRouter(prefix="/api")


class NewGuess(BaseModel):
    model_config = ConfigDict(extra="forbid")
    guess: str | list[str | None] = Field(
        description="six emoji as text, or six keys where null or '_' leaves a locked position blank"
    )
    locks: list[int] | None = Field(
        default=None, max_length=6, description="0-based positions to lock first (each a proven hit)"
    )


async def _round_json(request: Request, the_round: rounds.Round) -> dict[str, Any]:
    game = host_of(request).game
    now = await rounds.server_ms(game)
    secret = None
    if the_round.status_at(now) is RoundStatus.CLOSED:  # closed: its secret is shown once revealed
        [secret] = await rounds.read_revealed(game, [the_round.id])
    return views.round_view(the_round, now, secret)


@router.get("/rounds/current", tags=["rounds"], response_model=schemas.RoundOut, responses=answers(404))
async def current(request: Request) -> dict[str, Any]:
    the_round = await rounds.current_round(host_of(request).game)
    if the_round is None:
        raise Problem(404, "no_open_round", "no round is open right now")
    return await _round_json(request, the_round)


@router.get("/rounds", tags=["rounds"], response_model=schemas.RoundsOut, responses=answers(422))
async def recent(request: Request, limit: Annotated[int, Query(ge=1, le=100)] = 20) -> dict[str, Any]:
    game = host_of(request).game
    now = await rounds.server_ms(game)
    listed = await rounds.list_rounds(game, limit)
    closed = [r.id for r in listed if r.status_at(now) is RoundStatus.CLOSED]
    secrets = dict(zip(closed, await rounds.read_revealed(game, closed), strict=True))
    return {"rounds": [views.round_view(r, now, secrets.get(r.id)) for r in listed]}


@router.get(
    "/rounds/{round_id}", tags=["rounds"], response_model=schemas.RoundOut, responses=answers(400, 404)
)
async def one_round(request: Request, round_id: str) -> dict[str, Any]:
    return await _round_json(request, await rounds.get_round(host_of(request).game, round_id))


def _with_locks(guess: str | list[str | None], positions: dict[int, str]) -> str | list[str | None]:
    """The guess with the proven keys of ``positions`` in place (a guess that does not split into six
    slots is left as it is, for submit to refuse)."""
    if not positions:
        return guess
    slots: list[str | None] = list(graphemes(guess)) if isinstance(guess, str) else list(guess)
    if len(slots) != 6:
        return guess
    for position, key in positions.items():
        slots[position] = key
    return slots


@router.post(
    "/rounds/{round_id}/guesses",
    status_code=202,
    tags=["guesses"],
    response_model=schemas.SubmissionOut,
    responses=answers(400, 401, 402, 404, 409, 413, 422, 429),
)
async def submit_guess(
    request: Request,
    round_id: str,
    new: NewGuess,
    player_id: PlayerId,
    idempotency_key: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Validate, overlay locks, charge and enqueue one guess (see docs/http-api.md for every status)."""
    game = host_of(request).game_of(player_id)
    check_id(round_id, ROUND)
    wanted = sorted({locks.check_position(position) for position in new.locks or ()})
    overlay: dict[int, str] = {}
    if wanted:
        proven = await locks.read_proven(game, round_id, player_id)
        unproven = [position for position in wanted if position not in proven]
        if unproven:
            shown = ", ".join(str(position + 1) for position in unproven)
            raise NotProven(f"position {shown} is not a proven hit of yours: only proven hits can be locked")
        overlay = {position: proven[position] for position in wanted}
    job, stored = None, False
    if idempotency_key is not None:
        digest = idempotency.request_digest(round_id, new.model_dump())
        job, stored = await idempotency.job_for_key(game, player_id, idempotency_key, digest)
    try:
        submission = await guesses.submit(
            game, round_id, player_id, _with_locks(new.guess, overlay), job_id=job
        )
    except (InvalidInput, NotFound):  # definite refusals; after Unavailable the claim stays (effect unknown)
        if job is not None:
            await idempotency.settle(
                game, player_id, idempotency_key or "", job, None, stored=stored, definite=True
            )
        raise
    if job is not None:
        await idempotency.settle(
            game, player_id, idempotency_key or "", job, submission, stored=stored, guess=new.guess
        )
    if submission.refusal is not None:
        extra = {"problem": submission.problem} if submission.problem else {}
        status = REFUSAL_STATUS[submission.refusal]
        code = (
            "invalid_guess" if submission.refusal is guesses.Refusal.BAD_GUESS else submission.refusal.value
        )
        raise Problem(status, code, submission.detail, job_id=submission.job, **extra)
    for position in wanted:  # admitted: the locks asked for hold from now on
        with contextlib.suppress(RoundClosed):  # closed meanwhile: the guess is in all the same
            await locks.lock(game, round_id, player_id, position)
    return views.submission_view(submission)


@router.get(
    "/rounds/{round_id}/guesses",
    tags=["guesses"],
    response_model=schemas.MyGuessesOut,
    responses=answers(400, 401, 404, 422),
)
async def my_guesses(
    request: Request, round_id: str, player_id: PlayerId, limit: Annotated[int, Query(ge=1, le=1000)] = 200
) -> dict[str, Any]:
    """The caller's own guesses in the round (oldest first), their locks and proven positions."""
    game = host_of(request).game_of(player_id)
    await rounds.get_round(game, round_id)
    mine = await guesses.player_guesses(game, round_id, player_id, limit)
    held = await locks.read_locks(game, round_id, player_id)
    proven = await locks.read_proven(game, round_id, player_id)
    return {
        "round_id": round_id,
        "guesses": [views.guess_view(guess) for guess in mine],
        "locks": {str(position): key for position, key in held.items()},
        "proven": {str(position): key for position, key in proven.items()},
        **views.hints_view(round_id, mine),
    }


@router.put(
    "/rounds/{round_id}/locks/{position}",
    tags=["guesses"],
    response_model=schemas.LockOut,
    responses=answers(400, 401, 404, 409, 422),
)
async def lock_position(
    request: Request, round_id: str, position: int, player_id: PlayerId
) -> dict[str, Any]:
    key = await locks.lock(host_of(request).game_of(player_id), round_id, player_id, position)
    return {"position": position, "key": key}


@router.delete(
    "/rounds/{round_id}/locks/{position}",
    tags=["guesses"],
    response_model=schemas.UnlockOut,
    responses=answers(400, 401, 404, 409, 422),
)
async def unlock_position(
    request: Request, round_id: str, position: int, player_id: PlayerId
) -> dict[str, Any]:
    check_id(round_id, ROUND)
    removed = await locks.unlock(host_of(request).game_of(player_id), round_id, player_id, position)
    return {"position": position, "removed": removed}


@router.get(
    "/rounds/{round_id}/leaderboard",
    tags=["rounds"],
    response_model=schemas.BoardOut,
    responses=answers(400, 404, 422),
)
async def board(
    request: Request, round_id: str, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> dict[str, Any]:
    host = host_of(request)
    await rounds.get_round(host.game, round_id)
    if host.spread is None:
        entries = await leaderboard.read_board(host.game, round_id, limit)
    else:  # every partition's top, merged
        entries = await spread.read_board(host.spread, round_id, limit)
    return {"round_id": round_id, "entries": [views.entry_view(entry) for entry in entries]}


async def inspect_job(request: Request, job_id: str, owner: str | None) -> JobInfo:
    """The job's row; :class:`UnknownJob` (404) if there is none, or if ``owner`` is given and the job is
    not on that player's lane. A player gets the same answer for both, so another player's job is not
    shown to exist."""
    check_id(job_id, JOB)
    host = host_of(request)
    try:
        game = host.game_of(owner) if owner is not None else await host.game_of_job(job_id)
        with translate_errors():
            info = await game.bus.inspect(job_id)
    except UnknownJob:
        if owner is None:
            raise
        raise UnknownJob(f"no job {job_id} of yours") from None
    if owner is not None and info.lane != owner:
        raise UnknownJob(f"no job {job_id} of yours")
    return info


async def job_json(request: Request, info: JobInfo, *, operator: bool) -> dict[str, Any]:
    """Where the job is, its attempts token and its scored count (the claiming worker for the operator)."""
    host = host_of(request)
    return await job_row(host.game_of_lane(info.lane), info, operator=operator)


async def job_row(game: Game, info: JobInfo, *, operator: bool) -> dict[str, Any]:
    """The job's view in ``game`` (the real one, or the proof's demo game): :func:`views.job_view`."""
    guess_id = guess_of(info.job)
    with translate_errors():  # two calls: a cluster pipeline refuses TIME (it names no key)
        count = await game.redis.exists(game.keys.guess(guess_id))
    now = await rounds.server_ms(game)
    return views.job_view(info, guess_id=guess_id, scored_count=int(count), now_ms=now, operator=operator)


@router.get(
    "/jobs/{job_id}",
    tags=["guesses"],
    response_model=schemas.JobOut,
    responses=answers(400, 401, 404),
    dependencies=[EitherToken],
)
async def job(request: Request, job_id: str) -> dict[str, Any]:
    """A guess job of the caller's (the operator token sees any): its location in the bus's keyspace,
    its attempts token (the fence) and how many guess records exist for it."""
    check_id(job_id, JOB)
    token = bearer(request)
    owner = None if is_operator(request, token) else await player_of(request, token)
    return await job_json(request, await inspect_job(request, job_id, owner), operator=owner is None)

"""Admitting guesses: the host's side of the game. The host validates and charges; it never scores.

:func:`submit` validates the guess against the round's keyboard, overlays the player's locked positions,
mints the branded JOB id (or takes the caller's, for idempotent retries), then admits in **one** script
(``submit.lua``): if the job exists it is a *duplicate* and nothing is charged; else the wallet is
charged the first currency of the round's price list the player can pay, and the job is enqueued on the
player's own lane (named by their PLR), so the bus rotates service across players.

Outcomes, never exceptions, for what a player can cause: :class:`Outcome` ``ADMITTED`` / ``DUPLICATE``
/ ``REFUSED`` with a :class:`Refusal` (a bad guess, a closed round, insufficient funds, the guess limit,
a full queue, a solved player, an idempotency conflict). A refusal charged nothing and enqueued nothing.
Ill-formed ids raise :class:`~codemojex.errors.InvalidId`; an unknown round or player raises
:class:`~codemojex.errors.UnknownRound` / :class:`~codemojex.errors.UnknownPlayer`.

**Idempotency is decided on the request as the client sent it**: the job's admission digest
(:func:`request_digest`) is of the round, the player and the guess *before* the player's locks are
overlaid, never of the overlaid guess. So a retry with the same job id and the same guess is a duplicate
(charged once, answered with the guess as it was admitted) even if the player locked or unlocked a
position meanwhile, or if the retried guess would no longer parse against today's locks; another guess
under the same job id is an idempotency conflict even if the overlay would make the two equal. A lost
reply of a submit is therefore always safe to retry with the same job id.

The host and the score worker meet only through the job's payload (:mod:`codemojex.payload`): neither
module imports the other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from codemojex import locks as lock_rules
from codemojex.codes import parse_guess
from codemojex.engine import Feedback
from codemojex.errors import InvalidGuess, InvalidId, ScriptError, UnknownPlayer, UnknownRound
from codemojex.game import Game, check_int, encode_prices, translate_errors
from codemojex.keys import JOB, PLAYER, ROUND, check_id, guess_of
from codemojex.payload import decode_payload, encode_payload
from codemojex.rounds import round_from_row
from echomq import ids
from echomq import rows as bus_rows
from echomq.errors import InvalidId as BusInvalidId


class Outcome(StrEnum):
    ADMITTED = "admitted"  # charged and enqueued
    DUPLICATE = "duplicate"  # this job was admitted before; nothing changed, nothing charged
    REFUSED = "refused"  # nothing changed, nothing charged; see the Refusal


class Refusal(StrEnum):
    BAD_GUESS = "bad_guess"  # not six keys of the keyboard (see Submission.detail)
    ROUND_CLOSED = "round_closed"
    ROUND_NOT_OPEN = "round_not_open"  # scheduled for later
    ALREADY_SOLVED = "already_solved"  # the player cracked this round's code
    MAX_GUESSES = "max_guesses"  # the round's per-player guess limit is reached
    TOO_MANY_QUEUED = "too_many_queued"  # the player has the most guesses waiting to be scored
    INSUFFICIENT_FUNDS = "insufficient_funds"  # no currency of the price list can pay
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"  # the job id exists with another guess or player


@dataclass(frozen=True, slots=True)
class Submission:
    """What :func:`submit` did."""

    outcome: Outcome
    job: str  # the JOB id (minted, or the caller's)
    guess: tuple[str, ...] | None  # the guess as admitted, locks overlaid (None for a refusal)
    charged: tuple[str, int] | None  # the currency and amount (the original charge, for a duplicate)
    refusal: Refusal | None = None
    detail: str = ""
    problem: str = ""  # for BAD_GUESS: the InvalidGuess problem (wrong_length, off_keyboard, ...)


def _refused(refusal: Refusal, detail: str, job: str, problem: str = "") -> Submission:
    return Submission(Outcome.REFUSED, job, None, None, refusal, detail, problem)


def _charge(text: bytes) -> tuple[str, int] | None:
    if not text:
        return None
    currency, amount = text.decode().split("=", 1)
    return currency, int(amount)


_REASONS = {
    b"round_closed": Refusal.ROUND_CLOSED,
    b"round_not_open": Refusal.ROUND_NOT_OPEN,
    b"already_solved": Refusal.ALREADY_SOLVED,
    b"max_guesses": Refusal.MAX_GUESSES,
    b"too_many_queued": Refusal.TOO_MANY_QUEUED,
    b"insufficient_funds": Refusal.INSUFFICIENT_FUNDS,
}


def request_digest(round_id: str, player_id: str, guess: object) -> str:
    """The admission's identity: SHA-1 (hex) of the canonical JSON of the request as sent (the round, the
    player and the guess as typed, blanks and all, before any lock is overlaid)."""
    typed: object = list(guess) if isinstance(guess, Sequence) and not isinstance(guess, str) else guess
    body = {"v": 1, "round": round_id, "player": player_id, "guess": typed}
    # default=repr: a guess that is not text (refused as not_text) still has a digest, matching nothing.
    canonical = json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=repr)
    # surrogatepass: a guess holding a lone surrogate (refused as control) still has a digest.
    return hashlib.sha1(canonical.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def submit_call(
    game: Game,
    job: str,
    round_id: str,
    player_id: str,
    guess: Sequence[str] | None,
    *,
    digest: str | None = None,
) -> tuple[list[str], list[Any]]:
    """Keys and args of one submit.lua call (shared with the benchmark); ids are checked by the builders.

    ``digest`` is the :func:`request_digest` of the request as sent (by default: of ``guess`` itself, a
    request without blanks or locks); ``guess`` None sends an empty payload, which only asks whether the
    job was admitted before (see submit.lua)."""
    if digest is None:
        assert guess is not None, "a dedup-only call names its request digest"
        digest = request_digest(round_id, player_id, guess)
    bus_keys, keys = game.bus.keys, game.keys
    return (
        [
            bus_keys.job(job),
            bus_keys.lane(player_id),
            bus_keys.ring,
            bus_keys.delayed,
            bus_keys.wake,
            bus_keys.stats,
            bus_keys.waiting,
            keys.round(round_id),
            keys.player(player_id),
            keys.wallet(player_id),
            keys.ledger(player_id),
            keys.quota(round_id),
            keys.submitted(round_id, player_id),
            keys.charges(round_id),
            keys.standing(round_id),
            keys.guess(guess_of(job)),
            keys.trial,
            keys.allowances(round_id),
        ],
        [
            job,
            player_id,
            b"" if guess is None else encode_payload(round_id, player_id, guess),
            game.settings.max_attempts,
            game.bus.settings.wake_cap,
            game.settings.max_queued,
            digest,
            round_id,
            encode_prices(game.settings.allowance),
            game.settings.ledger_kept,
        ],
    )


def _recent(game: Game, job: str) -> str:
    """``job`` if it was minted within the bus's dedup window or 6 h of now, as echomq's enqueue asks
    (the tombstones of ids minted together share one hash: README "Memory"), else :class:`InvalidId`."""
    try:
        return ids.check_recent(job, game.bus.settings.id_span_ms)
    except BusInvalidId as exc:
        raise InvalidId(str(exc)) from None


async def submit(
    game: Game,
    round_id: str,
    player_id: str,
    guess: str | Sequence[str | None],
    *,
    job_id: str | None = None,
) -> Submission:
    """Validate, overlay locks, charge and admit ``guess`` as one job; see the module doc.

    A lost reply: retry with the same ``job_id`` and the same ``guess``; the retry answers DUPLICATE with
    the original charge if the first call admitted the job (whatever the locks are now), else it is
    judged afresh. A job id whose queue row was trimmed away (its tombstone expired) but that was scored
    or charged in this round is refused IDEMPOTENCY_CONFLICT ("already used"), charging nothing, however
    late the retry. Without ``job_id`` every call mints a new job, so a retry is a new guess."""
    check_id(round_id, ROUND)
    check_id(player_id, PLAYER)
    job = ids.mint(JOB) if job_id is None else _recent(game, check_id(job_id, JOB))
    with translate_errors():  # the round and the player's locks in one round trip
        async with game.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(game.keys.round(round_id))
            pipe.exists(game.keys.player(player_id))
            pipe.hgetall(game.keys.locks(round_id, player_id))
            round_row, player_exists, lock_row = await pipe.execute()
    if not round_row:
        raise UnknownRound(f"no round {round_id}")
    if not player_exists:
        raise UnknownPlayer(f"no player {player_id}")
    the_round = round_from_row(round_id, round_row)
    locks = lock_rules.positions(lock_row)
    digest = request_digest(round_id, player_id, guess)
    try:
        keys_of_guess = parse_guess(guess, the_round.keyboard, locks, length=the_round.length)
    except InvalidGuess as exc:
        if job_id is None:  # a fresh job id cannot have been admitted before
            return _refused(Refusal.BAD_GUESS, str(exc), job, exc.problem)
        # A retry whose guess no longer parses against today's locks may still be a duplicate.
        reply = await game.run("submit", *submit_call(game, job, round_id, player_id, None, digest=digest))
        if int(reply[0]) == -3 and bytes(reply[1]) == b"bad_guess":
            return _refused(Refusal.BAD_GUESS, str(exc), job, exc.problem)
        keys_of_guess = ()
    else:
        call = submit_call(game, job, round_id, player_id, keys_of_guess, digest=digest)
        reply = await game.run("submit", *call)
    code = int(reply[0])
    if code == 1:
        return Submission(Outcome.ADMITTED, job, keys_of_guess, _charge(reply[2]))
    if code == 0:
        # The admitted guess; once the row is a tombstone, today's reading of the request (empty if none).
        admitted = decode_payload(reply[3]).guess if reply[3] else keys_of_guess
        return Submission(Outcome.DUPLICATE, job, admitted, _charge(reply[2]))
    if code == -1:
        # 'used': the bus forgot the job id (its tombstone expired), the game did not: never a second charge.
        used = bytes(reply[1]) == b"used"
        detail = "this job id was already used" if used else "was admitted with another guess or player"
        return _refused(Refusal.IDEMPOTENCY_CONFLICT, f"job {job}: {detail}", job)
    reason = bytes(reply[1])
    if reason == b"unknown_player":
        raise UnknownPlayer(f"no player {player_id}")
    if reason == b"unknown_round":
        raise UnknownRound(f"no round {round_id}")
    if reason not in _REASONS:
        raise ScriptError(f"submit.lua answered {reply!r}")
    refusal = _REASONS[reason]
    return _refused(refusal, refusal.value.replace("_", " "), job)


@dataclass(frozen=True, slots=True)
class GuessRecord:
    """A scored guess (``GES``), as the score worker wrote it."""

    id: str
    serial: int  # the round's n-th record written: delivery history, shown only (the board never reads it)
    job: str
    round: str
    player: str
    guess: tuple[str, ...]
    feedback: Feedback
    submitted_ms: int  # admission (the job row's 'created', Redis clock): the guess's time on the board
    scored_ms: int
    # The player's n-th attempt in admission order; 0 and not counted if admitted after their solving
    # guess. A guess scored late but admitted earlier renumbers the player's later records.
    attempt: int
    counted: bool


def record_from_row(guess_id: str, row: dict[bytes, bytes]) -> GuessRecord:
    """A GES record from its hash."""
    return GuessRecord(
        id=guess_id,
        serial=int(row[b"serial"]),
        job=row[b"job"].decode(),
        round=row[b"round"].decode(),
        player=row[b"player"].decode(),
        guess=tuple(json.loads(row[b"guess"])),
        feedback=Feedback.from_code(row[b"code"].decode()),
        submitted_ms=int(row[b"submitted"]),
        scored_ms=int(row[b"scored"]),
        attempt=int(row[b"attempt"]),
        counted=row[b"counted"] == b"1",
    )


async def get_guess(game: Game, guess_id: str) -> GuessRecord | None:
    """The record of ``guess_id`` (a GES id), or None if it is not scored (yet)."""
    key = game.keys.guess(guess_id)
    with translate_errors():
        row: dict[bytes, bytes] = await game.redis.hgetall(key)
    return record_from_row(guess_id, row) if row else None


@dataclass(frozen=True, slots=True)
class PlayerGuess:
    """One of a player's admitted guesses, wherever it is: queued, active, scored or dead."""

    job: str
    guess: tuple[str, ...]
    submitted_ms: int
    state: str  # queued | delayed | active | scored | dead
    record: GuessRecord | None


async def player_guesses(game: Game, round_id: str, player_id: str, limit: int = 200) -> list[PlayerGuess]:
    """The player's newest ``limit`` admitted guesses in the round, oldest first, with their state and
    feedback."""
    check_int("limit", limit, 1, 10_000)
    key = game.keys.submitted(round_id, player_id)
    with translate_errors():
        rows = await game.redis.zrange(key, -limit, -1, withscores=True)
        async with game.redis.pipeline(transaction=False) as pipe:
            for raw, _ in rows:
                job = raw.decode()
                pipe.hgetall(game.bus.keys.job(job))
                pipe.hgetall(game.keys.guess(guess_of(job)))
            replies = await pipe.execute()
    result = []
    for index, (raw, score) in enumerate(rows):
        job = raw.decode()
        job_row, record_row = bus_rows.decode(replies[2 * index]), replies[2 * index + 1]
        state, payload = job_row.get("state"), job_row.get("payload")
        record = record_from_row(guess_of(job), record_row) if record_row else None
        guess = record.guess if record else (decode_payload(payload).guess if payload else ())
        shown = "scored" if record else (state.decode() if state else "unknown")
        result.append(PlayerGuess(job, guess, int(score), shown, record))
    return result

"""The operator's round commands (open, close), carried as jobs on the bus to the score worker.

Opening a round writes its secret, closing one reveals it: both touch ``cmxs:{t}:secret:<RND>``, which
the web host's Redis user may not (:mod:`codemojex.access`). So a host on that user does not run them:
it enqueues the command on the lane :data:`LANE` and waits for the job's result; the score worker, whose
user may, runs it (:func:`handle`, which :class:`codemojex.score_worker.ScoreWorker` calls for this
lane) and completes the job with a JSON result. Host and worker meet only through the job's payload and
result; players cannot reach the lane (a guess's lane is its player's id, ``PLR...``).

The payload is ``{"op": "open", "round": RND, "spec": {...}}`` or ``{"op": "close", "round": RND,
"operation": OPR}``; the host mints the ids, so a redelivered job (a worker crash) opens no second round
and answers the first close's time. The result is ``{"ok": {...}}`` or ``{"error": {"code", "message"}}``:
the host raises the same typed error (an invalid keyboard, an unknown or closed round) as a direct call.
No worker answering within :data:`WAIT_S` is :class:`~codemojex.errors.Unavailable` (503); the job may
still run later.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from codemojex import errors, rounds
from codemojex.game import Game, translate_errors
from codemojex.keys import OPERATION, ROUND, check_id
from echomq import Job, Permanent, ids
from echomq.states import JobState

LANE = "operator"
WAIT_S = 10.0
POLL_S = 0.05
MAX_ATTEMPTS = 3
OPEN_OPTIONS = ("keyboard", "size", "prices", "delay_s", "duration_s", "max_guesses")
# The typed errors a command may answer, by code (anything else is a ScriptError).
_ERRORS: dict[str, type[errors.CodemojexError]] = {
    cls.code: cls
    for cls in (
        errors.InvalidInput,
        errors.InvalidKeyboard,
        errors.InvalidOption,
        errors.InvalidGuess,
        errors.InvalidId,
        errors.UnknownRound,
        errors.RoundClosed,
    )
}


async def _request(game: Game, command: dict[str, Any]) -> dict[str, Any]:
    """Enqueue ``command`` for the worker and wait for its result (see the module doc)."""
    job = ids.mint("JOB")
    payload = json.dumps(command, ensure_ascii=False).encode()
    deadline = time.monotonic() + WAIT_S
    with translate_errors():
        await game.bus.enqueue(job, lane=LANE, payload=payload, max_attempts=MAX_ATTEMPTS)
        while True:
            info = await game.bus.inspect(job)
            if info.state is JobState.DONE:
                reply: dict[str, Any] = json.loads(info.result or b"{}")
                break
            if info.state is JobState.DEAD:
                raise errors.ScriptError(f"the operator's command failed: {info.error}")
            if time.monotonic() > deadline:
                raise errors.Unavailable(f"no score worker ran the operator's command within {WAIT_S:.0f} s")
            await asyncio.sleep(POLL_S)
    if "error" in reply:
        found = reply["error"]
        raise _ERRORS.get(str(found.get("code")), errors.ScriptError)(str(found.get("message")))
    ok: dict[str, Any] = reply["ok"]
    return ok


async def open_round(game: Game, **spec: Any) -> rounds.Round:
    """:func:`codemojex.rounds.open_round` run by the score worker (``spec``: its keyword options)."""
    unknown = set(spec) - set(OPEN_OPTIONS)
    if unknown:
        raise errors.InvalidOption(f"no round option {sorted(unknown)[0]!r}")
    round_id = ids.mint(ROUND)
    await _request(game, {"op": "open", "round": round_id, "spec": spec})
    return await rounds.get_round(game, round_id)


async def close_round(game: Game, round_id: str) -> int:
    """:func:`codemojex.rounds.close_round` run by the score worker; the close time (server ms)."""
    command = {"op": "close", "round": check_id(round_id, ROUND), "operation": ids.mint(OPERATION)}
    done = await _request(game, command)
    return int(done["closed_ms"])


async def handle(game: Game, job: Job) -> bytes:
    """Run the command of ``job`` (the worker's side); its JSON result. A payload the host would never
    write is :class:`~echomq.Permanent`; Redis unreachable raises (the job is retried)."""

    async def close(round_id: str, operation: str) -> int:
        return await rounds.close_round(game, round_id, operation=operation)

    return await run_command(job, functools.partial(_open, game), close)


async def run_command(
    job: Job,
    opener: Callable[[str, dict[str, Any]], Awaitable[str]],
    closer: Callable[[str, str], Awaitable[int]],
) -> bytes:
    """:func:`handle` with the game's own open (round id, checked options) and close (round id,
    operation): one game's, or a spread game's (:mod:`codemojex.spread_jobs`)."""
    try:
        command = json.loads(job.payload)
        op, round_id = command["op"], check_id(command["round"], ROUND)
    except (ValueError, KeyError, TypeError, errors.InvalidId) as exc:
        raise Permanent(f"not an operator command: {exc}") from None
    try:
        if op == "open":
            spec = command.get("spec") or {}
            if not isinstance(spec, dict) or set(spec) - set(OPEN_OPTIONS):
                raise errors.InvalidOption(f"round options are {', '.join(OPEN_OPTIONS)}")
            return _ok({"round_id": await opener(round_id, spec)})
        if op == "close":
            operation = check_id(command.get("operation"), OPERATION)
            return _ok({"closed_ms": await closer(round_id, operation)})
    except errors.Unavailable:
        raise
    except errors.CodemojexError as exc:
        return json.dumps({"error": {"code": exc.code, "message": str(exc)}}).encode()
    raise Permanent(f"no operator command {op!r}")


async def _open(game: Game, round_id: str, spec: dict[str, Any]) -> str:
    with contextlib.suppress(errors.UnknownRound):
        await rounds.get_round(game, round_id)
        return round_id  # an earlier delivery of this job opened it
    opened = await rounds.open_round(game, round_id=round_id, **spec)
    return opened.id


def _ok(value: dict[str, Any]) -> bytes:
    return json.dumps({"ok": value}).encode()

"""The commands a player plays a round with: ``guess`` (and, with ``--wait``, the wait for its score),
``guesses``, ``lock`` and ``unlock``. Each is a coroutine of the connected :class:`Game` and the parsed
arguments that returns a :class:`Result`, as in :mod:`codemojex.cli.commands`.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from codemojex import guesses, locks, players, rounds
from codemojex.cli.commands import Result
from codemojex.cli.render import (
    charge_text,
    feedback_json,
    feedback_lines,
    keys_text,
    positions_json,
    positions_text,
    squares,
    submission_json,
    table,
)
from codemojex.errors import NotProven
from codemojex.game import Game, translate_errors
from codemojex.guesses import GuessRecord, Outcome
from codemojex.keys import guess_of
from echomq.cli.exits import EXIT_FAILURE
from echomq.errors import UnknownJob
from echomq.states import JobState

POLL_S = 0.1  # how often --wait looks for the guess record


async def _job_state(game: Game, job: str) -> tuple[str | None, str | None]:
    """The job's state and last error, or (None, None) if it has no row."""
    with translate_errors():
        try:
            info = await game.bus.inspect(job)
        except UnknownJob:
            return None, None
    return info.state.value, info.error


async def _wait_scored(
    game: Game, job: str, wait_s: float
) -> tuple[GuessRecord | None, str | None, str | None]:
    """Poll until the guess record of ``job`` exists (or the job is dead, or ``wait_s`` passed): the
    record, or None and the job's last state and error."""
    deadline = time.monotonic() + wait_s
    guess_id = guess_of(job)
    while True:
        record = await guesses.get_guess(game, guess_id)
        if record is not None:
            return record, None, None
        state, error = await _job_state(game, job)
        left = deadline - time.monotonic()
        if state == JobState.DEAD.value or left <= 0:
            record = await guesses.get_guess(game, guess_id)  # scored just now?
            return (record, None, None) if record is not None else (None, state, error)
        await asyncio.sleep(min(POLL_S, left))


async def guess_submit(game: Game, args: argparse.Namespace) -> Result:
    typed = "".join(args.emoji)
    sub = await guesses.submit(game, args.round, args.player, typed, job_id=args.job)
    data = submission_json(sub, args)
    if sub.outcome is Outcome.REFUSED:
        reason = sub.refusal.value if sub.refusal is not None else "refused"
        if sub.problem:
            reason += f" ({sub.problem})"
        lines = [f"refused: {reason}"]
        if sub.detail and sub.detail != reason.replace("_", " "):
            lines.append(f"  {sub.detail}")
        lines.append(f"job {sub.job}  charged nothing")
        return Result(data, lines, EXIT_FAILURE)
    assert sub.guess is not None
    head = "admitted" if sub.outcome is Outcome.ADMITTED else "duplicate (admitted before; nothing changed)"
    lines = [head, f"job {sub.job}  charged {charge_text(sub.charged)}"]
    if args.wait is None:
        return Result(data, [*lines, f"  {keys_text(sub.guess)}"])
    record, state, error = await _wait_scored(game, sub.job, args.wait)
    if record is not None:
        data.update(state="scored", feedback=feedback_json(record))
        return Result(data, lines + feedback_lines(sub.guess, record))
    data["state"] = state
    lines.append(f"  {keys_text(sub.guess)}")
    if state == JobState.DEAD.value:
        data["error"] = error
        lines.append(f"not scored: the job is dead ({error})")
    else:
        lines.append(f"not scored within {args.wait:g} s (state {state}; is a worker running?)")
    return Result(data, lines, EXIT_FAILURE)


async def guess_list(game: Game, args: argparse.Namespace) -> Result:
    await rounds.get_round(game, args.round)
    player = await players.get_player(game, args.player)
    listed = await guesses.player_guesses(game, args.round, args.player, args.limit)
    held = await locks.read_locks(game, args.round, args.player)
    proven = await locks.read_proven(game, args.round, args.player)
    entries = []
    rows = []
    for number, item in enumerate(listed, start=1):
        record = item.record
        entries.append(
            {
                "job": item.job,
                "guess": list(item.guess),
                "state": item.state,
                "submitted_ms": item.submitted_ms,
                "feedback": None if record is None else feedback_json(record),
            }
        )
        marks = "" if record is None else squares(record.feedback)
        counts = "" if record is None else f"{record.feedback.hits}/{record.feedback.nears}"
        rows.append([number, item.job, item.state, counts, keys_text(item.guess), marks])
    data = {
        "round": args.round,
        "player": args.player,
        "name": player.name,
        "guesses": entries,
        "locks": positions_json(held),
        "proven": positions_json(proven),
    }
    lines = [f"{player.name} ({args.player}) in round {args.round}"]
    if rows:
        lines += table(["#", "job", "state", "hits/nears", "guess", "feedback"], rows)
    else:
        lines.append("no guesses yet")
    lines += [f"proven: {positions_text(proven)}", f"locked: {positions_text(held)}"]
    return Result(data, lines)


async def position_lock(game: Game, args: argparse.Namespace) -> Result:
    try:  # lock.lua checks the round and the player
        key = await locks.lock(game, args.round, args.player, args.position - 1)
    except NotProven:  # its message counts positions from 0; the command counts them from 1
        raise NotProven(
            f"position {args.position} is not a proven hit of yours in round {args.round}"
        ) from None
    data = {"round": args.round, "player": args.player, "position": args.position, "key": key, "locked": True}
    return Result(data, [f"position {args.position} locked to {key}"])


async def position_unlock(game: Game, args: argparse.Namespace) -> Result:
    await rounds.get_round(game, args.round)  # unlock checks the player
    removed = await locks.unlock(game, args.round, args.player, args.position - 1)
    data = {"round": args.round, "player": args.player, "position": args.position, "unlocked": removed}
    if removed:
        return Result(data, [f"position {args.position} unlocked"])
    return Result(data, [f"position {args.position} was not locked"], EXIT_FAILURE)

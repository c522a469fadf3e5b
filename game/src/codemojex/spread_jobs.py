"""The score worker's handler of a spread game, and the operator's round commands on it.

:class:`SpreadScoreWorker` scores each guess in its lane's partition (a :class:`~codemojex.score_worker.
ScoreWorker` each) and runs the operator's round commands of the lane :data:`codemojex.round_jobs.LANE`,
which a host whose Redis user may not touch secrets sends as jobs (:mod:`codemojex.round_jobs`,
``HostConfig.rounds_by_worker``): :func:`open_round` and :func:`close_round` here are that host's side.

**Open, redelivered.** A spread round is written to every partition with the same keyboard, secret and
opening instant (:func:`codemojex.spread.open_round`), so a job redelivered after a worker died midway
must open the *same* round in the partitions not written yet, never draw another secret. The first
delivery draws the keyboard (from the command's options), the secret and the opening instant once, and
keeps them as the round's *draft* under the first partition's secrets (``cmxs:{<tag>.0}:draft:<RND>``,
``SET NX`` with a week's expiry, out of the host's reach as the secret is): every delivery opens with
the draft it reads back, which is the mend :func:`codemojex.spread.open_round` documents. A lost reply of
the ``SET``: the ``GET`` after it reads what is there. The close runs under the operation id the host
minted, as on one game (a redelivery answers the first close's time).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from codemojex import codes, round_jobs, rounds
from codemojex import keyboard as kb
from codemojex.engine import LENGTH
from codemojex.game import Game, translate_errors
from codemojex.keys import ROUND, check_id
from codemojex.score_worker import ScoreWorker
from codemojex.spread import SpreadGame
from codemojex.spread import close_round as close_everywhere
from codemojex.spread import open_round as open_everywhere
from echomq import Finish, Job
from echomq.partitions import partition_of

DRAFT_TTL_S = 7 * 24 * 3600  # far past any job's redeliveries


class SpreadScoreWorker:
    """``SpreadScoreWorker(spread).handle`` is the handler of an :class:`echomq.Worker` on
    ``spread.pbus``: each job is scored by its lane's partition; the operator's lane runs its commands."""

    def __init__(self, spread: SpreadGame) -> None:
        self.spread = spread
        self.workers = [ScoreWorker(game) for game in spread.games]

    async def handle(self, job: Job) -> Finish | bytes:
        if job.lane == round_jobs.LANE:
            return await handle_command(self.spread, job)
        return await self.workers[partition_of(job.lane, len(self.workers))].handle(job)


def command_game(spread: SpreadGame) -> Game:
    """The partition whose bus carries the operator's lane."""
    return spread.games[partition_of(round_jobs.LANE, len(spread.games))]


async def open_round(spread: SpreadGame, **spec: Any) -> rounds.Round:
    """:func:`codemojex.spread.open_round` run by the score worker (``spec``: the round options of
    :data:`codemojex.round_jobs.OPEN_OPTIONS`)."""
    return await round_jobs.open_round(command_game(spread), **spec)


async def close_round(spread: SpreadGame, round_id: str) -> int:
    """:func:`codemojex.spread.close_round` run by the score worker; the close time (server ms)."""
    return await round_jobs.close_round(command_game(spread), round_id)


async def handle_command(spread: SpreadGame, job: Job) -> bytes:
    """Run an operator command job on every partition (the worker's side): see the module doc."""

    async def close(round_id: str, operation: str) -> int:
        return await close_everywhere(spread, round_id, operation=operation)

    return await round_jobs.run_command(job, functools.partial(_open, spread), close)


async def _open(spread: SpreadGame, round_id: str, spec: dict[str, Any]) -> str:
    draft = await _draft(spread, round_id, spec)
    opened = await open_everywhere(
        spread,
        keyboard=draft["keyboard"],
        secret=draft["secret"],
        round_id=round_id,
        opens_at_ms=int(draft["opens_at_ms"]),
        prices=spec.get("prices"),
        duration_s=spec.get("duration_s"),
        max_guesses=spec.get("max_guesses"),
    )
    return opened.id


async def _draft(spread: SpreadGame, round_id: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The round's keyboard, secret and opening instant: drawn by the first delivery, kept, read back."""
    home = spread.games[0]
    key = f"{home.keys.secret_prefix}draft:{check_id(round_id, ROUND)}"
    with translate_errors():
        kept = await home.redis.get(key)
    if kept is None:
        keyboard = spec.get("keyboard")
        if keyboard is None:
            board = kb.random_keyboard(
                spread.settings.keyboard_size if spec.get("size") is None else spec["size"]
            )
        else:
            board = kb.Keyboard.of(keyboard)
        delay_ms = round(
            rounds.check_seconds("delay_s", spec.get("delay_s", 0), 0, rounds.MAX_DURATION_S) * 1000
        )
        drawn = {
            "keyboard": list(board.keys),
            "secret": list(codes.draw_secret(board, LENGTH)),
            "opens_at_ms": await rounds.server_ms(home) + delay_ms,
        }
        with translate_errors():
            await home.redis.set(key, json.dumps(drawn, ensure_ascii=False), nx=True, ex=DRAFT_TTL_S)
            kept = await home.redis.get(key)
    found: dict[str, Any] = json.loads(kept)
    return found

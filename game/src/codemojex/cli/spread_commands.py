"""The play and operator commands on a spread game (``--partitions P``, :mod:`codemojex.spread`): the same
commands, answers and refusals as on one game, each routed where its data lives.

- A command about one player (``guess``, ``guesses``, ``lock``, ``unlock``, ``wallet``) runs the
  one-game command in the player's partition (their lane, wallet, locks and records are all there).
- ``round list`` and ``round schedule`` run it in the home partition (0), which keeps the listings and
  the schedule's settings.
- ``round open`` and ``round close`` open and close the round in every partition
  (:func:`codemojex.spread.open_round`, :func:`~codemojex.spread.close_round`); ``round show`` reads the
  home's row, the players of every partition, and the secret only once it is revealed (closed in every
  partition); ``player new`` registers in the partition of the name (:func:`codemojex.spread.register`)
  and issues the recovery code there; ``board`` is the merged board (:func:`codemojex.spread.read_board`;
  ``--rebuild`` rebuilds each partition's first); ``refund`` asks every partition (a job is in one).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine
from typing import Any

from codemojex import leaderboard, recovery, refunds, rounds, spread, wallet
from codemojex.cli import commands, play
from codemojex.cli.commands import Command, Result, round_options
from codemojex.cli.render import fields, keys_text, round_json, round_lines, time_text
from codemojex.errors import NotFound
from codemojex.game import Game, translate_errors
from codemojex.refunds import Refund
from codemojex.spread import SpreadGame

SpreadCommand = Callable[[SpreadGame, argparse.Namespace], Coroutine[Any, Any, Result]]


def of_player(command: Command) -> SpreadCommand:
    """The one-game ``command`` run in the partition of ``args.player``."""

    async def run(game: SpreadGame, args: argparse.Namespace) -> Result:
        return await command(game.game_of(args.player), args)

    return run


def at_home(command: Command) -> SpreadCommand:
    """The one-game ``command`` run in the home partition."""

    async def run(game: SpreadGame, args: argparse.Namespace) -> Result:
        return await command(game.games[0], args)

    return run


async def round_open(game: SpreadGame, args: argparse.Namespace) -> Result:
    the_round = await spread.open_round(game, **round_options(args))
    data = round_json(the_round, await rounds.server_ms(game.games[0]))
    data["partitions"] = len(game.games)
    return Result(data, round_lines(data, the_round))


async def _revealed(home: Game, round_id: str) -> tuple[str, ...] | None:
    """The secret once shown (closed in every partition), else None."""
    return (await rounds.read_revealed(home, [round_id]))[0]


async def round_close(game: SpreadGame, args: argparse.Namespace) -> Result:
    closed_ms = await spread.close_round(game, args.round)
    secret = await _revealed(game.games[0], args.round)
    data = {
        "id": args.round,
        "status": "closed",
        "closed_ms": closed_ms,
        "secret": None if secret is None else list(secret),
    }
    shown = keys_text(secret) if secret else "shown once every partition holds the round closed"
    lines = fields([("round", args.round), ("closed", time_text(closed_ms)), ("secret", shown)])
    return Result(data, lines)


async def round_show(game: SpreadGame, args: argparse.Namespace) -> Result:
    home = game.games[0]
    if args.round is None:
        found = await rounds.current_round(home)
        if found is None:
            raise NotFound("no round is open now; name one (codemojex round list)")
        the_round = found
    else:
        the_round = await rounds.get_round(home, args.round)
    data = round_json(the_round, await rounds.server_ms(home))
    with translate_errors():
        data["players"] = sum([int(await g.redis.zcard(g.keys.board(the_round.id))) for g in game.games])
    secret = await _revealed(home, the_round.id)
    data["secret"] = None if secret is None else list(secret)
    data["partitions"] = len(game.games)
    return Result(data, round_lines(data, the_round))


async def player_new(game: SpreadGame, args: argparse.Namespace) -> Result:
    player = await spread.register(game, args.name)
    there = game.game_of(player.id)
    code = await recovery.issue(there, player.id)  # minted to hash to the player's partition
    purse = await wallet.read_wallet(there, player.id, ledger_limit=1)
    return commands.player_result(there, player, purse, code)


async def board_show(game: SpreadGame, args: argparse.Namespace) -> Result:
    await rounds.get_round(game.games[0], args.round)
    if args.rebuild:
        for part in game.games:
            await leaderboard.rebuild(part, args.round)
    entries = await spread.read_board(game, args.round, args.limit)
    return commands.board_result(args.round, entries)


async def refund_run(game: SpreadGame, args: argparse.Namespace) -> Result:
    """:func:`codemojex.cli.commands.refund_run` in every partition: a named job has its row in one
    partition (the others answer ``not_dead``: no row), so each job's answer is the one of the
    partition that holds it."""
    if args.jobs:
        outcomes = dict.fromkeys(args.jobs, Refund.NOT_DEAD)
        for part in game.games:
            for result in await refunds.refund(part, args.jobs):
                if result.outcome is not Refund.NOT_DEAD:
                    outcomes[result.job] = result.outcome
        refunded = [job for job, outcome in outcomes.items() if outcome is Refund.REFUNDED]
        return commands.refund_result(len(outcomes), refunded, {j: o.value for j, o in outcomes.items()})
    checked, refunded = 0, []
    for part in game.games:
        done = await refunds.refund_dead(part, since_ms=0)
        checked, refunded = checked + done.checked, refunded + list(done.refunded)
    return commands.refund_result(checked, refunded, {})


# The spread variant of each one-game command that has one (``worker`` takes --partitions itself).
SPREAD: dict[Command, SpreadCommand] = {
    commands.round_open: round_open,
    commands.round_close: round_close,
    commands.round_show: round_show,
    commands.round_list: at_home(commands.round_list),
    commands.round_schedule: at_home(commands.round_schedule),
    commands.player_new: player_new,
    commands.board_show: board_show,
    commands.wallet_show: of_player(commands.wallet_show),
    commands.refund_run: refund_run,
    play.guess_submit: of_player(play.guess_submit),
    play.guess_list: of_player(play.guess_list),
    play.position_lock: of_player(play.position_lock),
    play.position_unlock: of_player(play.position_unlock),
}

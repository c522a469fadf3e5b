"""The ``codemojex`` commands that run the game and read it: ``round open/close/show/list``, ``player new``,
``board``, ``wallet``, ``refund`` and ``worker`` (a player's moves are in :mod:`codemojex.cli.play`); and
:class:`Result`, what every command returns: the JSON document and the readable lines to print, and the
exit code. A refusal is a result with exit code 1; an error is raised, for :func:`~.exits.explain`.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from codemojex import leaderboard, players, recovery, refunds, rounds, schedule, wallet
from codemojex.cli.exits import EXIT_OK
from codemojex.cli.render import fields, keys_text, round_json, round_lines, table, time_text
from codemojex.errors import NotFound
from codemojex.game import Game, translate_errors
from codemojex.players import Player
from codemojex.refunds import Refund, Refunder
from codemojex.score_worker import ScoreWorker
from codemojex.spread import SpreadGame
from codemojex.spread_worker import run_spread_worker
from codemojex.trials import Expirer
from codemojex.upkeep import Upkeep
from codemojex.wallet import Wallet
from echomq.partitions import PartitionedBus
from echomq.worker.handler import Handler
from echomq.worker.runner import Worker


@dataclass(slots=True)
class Result:
    """What a command prints: ``data`` with --json, else ``lines``; and its exit code."""

    data: Any
    lines: list[str] = field(default_factory=list)
    code: int = EXIT_OK


Command = Callable[[Game, argparse.Namespace], Coroutine[Any, Any, Result]]


def round_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``open_round`` (one game's or a spread game's) from ``round open``."""
    return {
        "keyboard": None if args.keyboard is None else "".join(args.keyboard.split()),
        "size": args.size,
        "prices": args.prices,
        "delay_s": args.delay,
        "duration_s": args.duration,
        "max_guesses": args.max_guesses,
    }


async def round_open(game: Game, args: argparse.Namespace) -> Result:
    the_round = await rounds.open_round(game, **round_options(args))
    data = round_json(the_round, await rounds.server_ms(game))
    return Result(data, round_lines(data, the_round))


async def round_close(game: Game, args: argparse.Namespace) -> Result:
    closed_ms = await rounds.close_round(game, args.round)
    secret = await rounds.reveal_secret(game, args.round)
    data = {"id": args.round, "status": "closed", "closed_ms": closed_ms, "secret": list(secret)}
    lines = fields([("round", args.round), ("closed", time_text(closed_ms)), ("secret", keys_text(secret))])
    return Result(data, lines)


async def round_show(game: Game, args: argparse.Namespace) -> Result:
    if args.round is None:
        found = await rounds.current_round(game)
        if found is None:
            raise NotFound("no round is open now; name one (codemojex round list)")
        the_round = found
    else:
        the_round = await rounds.get_round(game, args.round)
    now_ms = await rounds.server_ms(game)
    data = round_json(the_round, now_ms)
    with translate_errors():
        data["players"] = int(await game.redis.zcard(game.keys.board(the_round.id)))
    closed = the_round.status_at(now_ms) is rounds.RoundStatus.CLOSED
    data["secret"] = list(await rounds.reveal_secret(game, the_round.id)) if closed else None
    return Result(data, round_lines(data, the_round))


async def round_list(game: Game, args: argparse.Namespace) -> Result:
    listed = await rounds.list_rounds(game, args.limit)
    now_ms = await rounds.server_ms(game)
    data = [round_json(the_round, now_ms) for the_round in listed]
    if not listed:
        return Result(data, [f"no rounds on bus {game.bus.tag}"])
    rows = [
        [
            r["id"],
            r["status"],
            time_text(r["opens_ms"]),
            time_text(r["closes_ms"], "when closed"),
            keys_text(r["keyboard"]),
        ]
        for r in data
    ]
    return Result(data, table(["round", "status", "opens", "closes", "keyboard"], rows))


async def round_schedule(game: Game, args: argparse.Namespace) -> Result:
    """The round settings (codemojex.schedule), changed by the options given; ``serve`` writes them at
    its start from its own flags, so change them here for a game run apart from serve."""
    kept = await schedule.read_settings(game)
    changes = {
        name: value
        for name, value in (
            ("on", args.on),
            ("duration_s", args.duration),
            ("gap_s", args.gap),
            ("retention_s", args.retention),
        )
        if value is not None
    }
    settings = replace(kept, **changes)
    if changes:
        await schedule.write_settings(game, settings)
    data = asdict(settings)
    lines = fields(
        [
            ("schedule", "on" if settings.on else "off"),
            ("duration", f"{settings.duration_s:g} s"),
            ("gap", f"{settings.gap_s:g} s"),
            ("retention", f"{settings.retention_s:g} s"),
        ]
    )
    return Result(data, lines)


async def player_new(game: Game, args: argparse.Namespace) -> Result:
    player = await players.register(game, args.name)
    code = await recovery.issue(game, player.id)  # the way into the Play page for this player
    purse = await wallet.read_wallet(game, player.id, ledger_limit=1)
    return player_result(game, player, purse, code)


def player_result(game: Game, player: Player, purse: Wallet, code: str) -> Result:
    """What ``player new`` prints of a player registered in ``game``."""
    allowance = dict(game.settings.allowance)  # the economy: topped up at each round's first guess
    data = {
        "id": player.id,
        "name": player.name,
        "created_ms": player.created_ms,
        "wallet": purse.balances,
        "allowance": allowance,
        "recovery_code": code,
    }
    balances = ", ".join(f"{amount} {currency}" for currency, amount in purse.balances.items()) or "empty"
    level = ", ".join(f"{amount} {currency}" for currency, amount in allowance.items())
    lines = fields(
        [
            ("player", player.id),
            ("name", player.name),
            ("wallet", balances),
            ("allowance", f"{level} (each round's first guess tops the wallet up to it)"),
            ("recovery", f"{code}  (signs this player in on the Play page; shown once)"),
        ]
    )
    return Result(data, lines)


async def board_show(game: Game, args: argparse.Namespace) -> Result:
    await rounds.get_round(game, args.round)
    if args.rebuild:
        await leaderboard.rebuild(game, args.round)
    return board_result(args.round, await leaderboard.read_board(game, args.round, args.limit))


def board_result(round_id: str, entries: list[leaderboard.Entry]) -> Result:
    """What ``board`` prints of a round's board."""
    data = [
        {
            "rank": entry.rank,
            "player": entry.standing.player,
            "name": entry.name,
            "solved": entry.standing.solved,
            "best_hits": entry.standing.best_hits,
            "best_nears": entry.standing.best_nears,
            "attempts": entry.standing.attempts,
            "best_at_ms": entry.standing.best_at_ms,
        }
        for entry in entries
    ]
    if not data:
        return Result(data, [f"no scored guesses in round {round_id} yet"])
    rows = [
        [
            row["rank"],
            row["name"],
            "yes" if row["solved"] else "no",
            row["best_hits"],
            row["best_nears"],
            row["attempts"],
            row["player"],
        ]
        for row in data
    ]
    return Result(data, table(["rank", "name", "solved", "hits", "nears", "attempts", "player"], rows))


async def wallet_show(game: Game, args: argparse.Namespace) -> Result:
    player = await players.get_player(game, args.player)
    # The newest MAX_LEDGER entries; reconcile replays a partial ledger from the balance before it.
    purse = await wallet.read_wallet(game, args.player)
    problems = wallet.reconcile(purse)
    shown = purse.ledger[-args.ledger :] if args.ledger else ()
    data = {
        "player": args.player,
        "name": player.name,
        "balances": purse.balances,
        "ledger": [asdict(entry) for entry in shown],
        "ledger_entries": purse.ledger_total,
        "reconciles": not problems,
        "problems": problems,
    }
    lines = [f"{player.name} ({args.player})"]
    lines += fields([(currency, amount) for currency, amount in purse.balances.items()] or [("(empty)", "")])
    if shown:
        lines.append(f"ledger, the last {len(shown)} of {purse.ledger_total} entries:")
        rows = [
            [time_text(e.at_ms), e.currency, f"{e.delta:+d}", e.balance, e.reason, e.job or "-"]
            for e in shown
        ]
        lines += [
            "  " + line for line in table(["at", "currency", "delta", "balance", "reason", "job"], rows)
        ]
    if problems:
        lines.append("reconciles: NO")
        lines += [f"  {problem}" for problem in problems]
    else:
        lines.append("reconciles: yes")
    return Result(data, lines)


async def refund_run(game: Game, args: argparse.Namespace) -> Result:
    """The operator's path: refund the named dead guesses, or every dead guess not refunded yet. Safe to
    run at any time, as often as wanted, beside the workers' own passes (each refund happens once)."""
    if args.jobs:
        results = await refunds.refund(game, args.jobs)
        checked, refunded = len(results), [r.job for r in results if r.outcome is Refund.REFUNDED]
        outcomes = {result.job: result.outcome.value for result in results}
    else:
        done = await refunds.refund_dead(game, since_ms=0)
        checked, refunded, outcomes = done.checked, list(done.refunded), {}
    return refund_result(checked, refunded, outcomes)


def refund_result(checked: int, refunded: list[str], outcomes: dict[str, str]) -> Result:
    """What ``refund`` prints."""
    data = {"checked": checked, "refunded": refunded, "outcomes": outcomes}
    lines = [f"{len(refunded)} of {checked} dead jobs refunded now"]
    lines += [f"  {job}: {outcome}" for job, outcome in outcomes.items()]
    return Result(data, lines)


async def worker_run(game: Game, args: argparse.Namespace) -> Result:
    options: dict[str, Any] = {
        "concurrency": args.concurrency,
        "lease_ms": args.lease_ms,
        "sweep_every_s": args.sweep_every,
        "grace_s": args.grace,
    }
    data: dict[str, Any] = {"tag": game.bus.tag}
    # A spread game over the partitions of this client's tag (codemojex.spread); P = 1 is one game on
    # the tag itself, as the host's --partitions 1 (else its guesses wait on keys no worker serves).
    if args.partitions > 1:
        pbus = PartitionedBus(game.bus.redis, game.bus.tag, args.partitions, game.bus.settings)
        worker = await run_spread_worker(SpreadGame(pbus, game.settings), **options)
        data["partitions"] = args.partitions
    else:
        worker = await run_score_worker(game, **options)
    data.update(owner=worker.owner, counts=asdict(worker.counts))
    return Result(data, [])  # the readable record is the log (worker.started ... worker.stopped)


async def run_score_worker(
    game: Game,
    *,
    concurrency: int,
    lease_ms: int,
    sweep_every_s: float,
    grace_s: float,
    wrap: Callable[[Handler], Handler] | None = None,
) -> Worker:
    """The score worker until SIGTERM / SIGINT, with the refunder of dead guesses and the expiry of players
    who never played (:class:`codemojex.trials.Expirer`) beside it; ``wrap``
    (the conformance suite's worker) wraps the handler. Returns the stopped worker."""
    refunder = Refunder(game, every_s=sweep_every_s)  # refunds dead guesses (codemojex.refunds)
    expirer = Expirer(game)  # deletes players who never played (codemojex.trials)
    upkeep = Upkeep(game, every_s=sweep_every_s)  # the script cache and reveals (codemojex.upkeep)
    handler: Handler = ScoreWorker(game).handle
    worker = Worker(
        game.bus,
        wrap(handler) if wrap is not None else handler,
        concurrency=concurrency,
        lease_ms=lease_ms,
        sweep_every_s=sweep_every_s,
        grace_s=grace_s,
        on_dead=refunder.on_dead,
    )
    stopping = asyncio.Event()
    refunds = asyncio.create_task(refunder.run(stopping), name="refunds")
    expiry = asyncio.create_task(expirer.run(stopping), name="expiry")
    upkept = asyncio.create_task(upkeep.run(stopping), name="upkeep")
    try:
        await worker.run(handle_signals=True)
    finally:
        stopping.set()
        await refunds
        await expiry
        await upkept
    return worker

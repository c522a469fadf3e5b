"""The ``codemojex`` command line: an argparse parser whose errors are one line (exit code 2), the global
options (which may also follow a command) and the sub-commands, each bound to its coroutine; their
argument types, which reject ill-formed input before anything touches Redis, are
:mod:`codemojex.cli.arguments`.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from codemojex.cli import acl, commands, play, processes
from codemojex.cli.arguments import count, id_type, position, price, seconds
from codemojex.cli.commands import Command
from codemojex.cli.exits import PROG
from codemojex.cli.spread_commands import SPREAD
from codemojex.engine import LENGTH
from codemojex.keys import JOB, PLAYER, ROUND
from echomq.cli.env import DEFAULT_URL
from echomq.cli.exits import EXIT_USAGE
from echomq.core import DEFAULT_TAG
from echomq.partitions import MAX_PARTITIONS
from echomq.worker.runner import SWEEP_PERIOD_S


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser of the whole command line."""
    parser = _Parser(prog=PROG, description="Codemojex: crack the six-emoji code (on EchoMQ).")
    # The global options; `common` repeats them after a command (SUPPRESS: only when given there).
    common = _Parser(add_help=False)
    for target, default in ((parser, False), (common, argparse.SUPPRESS)):
        is_global = default is False
        target.add_argument(
            "--tag", default=DEFAULT_TAG if is_global else default, help=f"bus tag (default {DEFAULT_TAG})"
        )
        target.add_argument(
            "--redis-url",
            default=None if is_global else default,
            metavar="URL",
            help=f"the Redis server (default $REDIS_URL, else {DEFAULT_URL})",
        )
        target.add_argument(
            "--json", action="store_true", default=default, help="print one JSON document on stdout"
        )
        target.add_argument(
            "--cluster",
            action="store_true",
            default=default,
            help="the URL names one node of a Redis Cluster (the client discovers the others)",
        )
        target.add_argument(
            "--wait-replicas",
            type=count(0),
            default=None if is_global else default,
            metavar="N",
            help="durable admission: a guess is acknowledged once N replicas hold it (default 0)",
        )
        target.add_argument(
            "--log-level",
            default="INFO" if is_global else default,
            choices=["DEBUG", "INFO", "WARNING", "ERROR"],
            type=str.upper,
            help="of the worker's logs on stderr (default INFO)",
        )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def leaf(group: Any, name: str, run: Command, help_text: str) -> argparse.ArgumentParser:
        command: argparse.ArgumentParser = group.add_parser(name, parents=[common], help=help_text)
        command.set_defaults(run=run)
        if run in SPREAD:  # the same command on a spread game (codemojex.cli.spread_commands)
            command.add_argument(
                "--partitions",
                type=count(1, MAX_PARTITIONS),
                default=1,
                metavar="P",
                help="a spread game over tags <tag>.0 ... <tag>.<P-1> (default 1: one game on the tag)",
            )
        return command

    round_group = sub.add_parser("round", help="open, close, show and list rounds").add_subparsers(
        dest="round_command", required=True, metavar="ROUND_COMMAND"
    )
    round_open = leaf(round_group, "open", commands.round_open, "open a round (its secret stays secret)")
    board_kind = round_open.add_mutually_exclusive_group()
    board_kind.add_argument("--size", type=int, default=None, metavar="N", help="random keyboard of N emoji")
    board_kind.add_argument(
        "--keyboard", default=None, metavar="EMOJI", help="the keyboard's emoji, in order"
    )
    round_open.add_argument(
        "--price",
        dest="prices",
        action="append",
        type=price,
        default=None,
        metavar="CURRENCY=AMOUNT",
        help="a guess's price; repeat it, in order of preference (default ticket=1 then coin=5)",
    )
    round_open.add_argument(
        "--duration", type=float, default=None, metavar="SECONDS", help="default: until closed"
    )
    round_open.add_argument(
        "--delay", type=float, default=0.0, metavar="SECONDS", help="open this much later"
    )
    round_open.add_argument("--max-guesses", type=int, default=None, metavar="N", help="per player")
    round_close = leaf(round_group, "close", commands.round_close, "close a round now and reveal its secret")
    round_close.add_argument("round", type=id_type(ROUND), metavar="ROUND")
    round_show = leaf(round_group, "show", commands.round_show, "one round (default: the one open now)")
    round_show.add_argument("round", nargs="?", type=id_type(ROUND), default=None, metavar="ROUND")
    round_list = leaf(round_group, "list", commands.round_list, "the latest rounds, newest first")
    round_list.add_argument("--limit", type=count(1), default=20, metavar="N")
    round_schedule = leaf(
        round_group, "schedule", commands.round_schedule, "show or change the round schedule and retention"
    )
    switch = round_schedule.add_mutually_exclusive_group()
    switch.add_argument("--on", dest="on", action="store_true", default=None, help="keep rounds going")
    switch.add_argument("--off", dest="on", action="store_false", help="open no more rounds on a clock")
    round_schedule.add_argument(
        "--duration", type=seconds, default=None, metavar="S", help="a round's length"
    )
    round_schedule.add_argument("--gap", type=seconds, default=None, metavar="S", help="close to next open")
    round_schedule.add_argument(
        "--retention", type=seconds, default=None, metavar="S", help="a closed round's guesses kept this long"
    )

    player_group = sub.add_parser("player", help="register players").add_subparsers(
        dest="player_command", required=True, metavar="PLAYER_COMMAND"
    )
    player_new = leaf(
        player_group,
        "new",
        commands.player_new,
        "register a player (with the starting grant, if the game has one)",
    )
    player_new.add_argument("name", metavar="NAME")

    guess = leaf(sub, "guess", play.guess_submit, "guess the code of a round")
    guess.add_argument("round", type=id_type(ROUND), metavar="ROUND")
    guess.add_argument("player", type=id_type(PLAYER), metavar="PLAYER")
    guess.add_argument(
        "emoji", nargs="+", metavar="EMOJI", help="six emoji, together or apart; _ is a blank a lock fills"
    )
    guess.add_argument("--job", type=id_type(JOB), default=None, metavar="JOB", help="retry with this id")
    guess.add_argument(
        "--wait", type=seconds, default=None, metavar="SECONDS", help="wait for the feedback this long"
    )

    listing = leaf(sub, "guesses", play.guess_list, "a player's guesses in a round, with their feedback")
    listing.add_argument("round", type=id_type(ROUND), metavar="ROUND")
    listing.add_argument("player", type=id_type(PLAYER), metavar="PLAYER")
    listing.add_argument("--limit", type=count(1), default=200, metavar="N", help="the latest N")

    for name, run, help_text in (
        ("lock", play.position_lock, "lock a position a scored guess proved a hit"),
        ("unlock", play.position_unlock, "remove a lock"),
    ):
        command = leaf(sub, name, run, help_text)
        command.add_argument("round", type=id_type(ROUND), metavar="ROUND")
        command.add_argument("player", type=id_type(PLAYER), metavar="PLAYER")
        command.add_argument("position", type=position, metavar="POSITION", help=f"1 to {LENGTH}")

    board = leaf(sub, "board", commands.board_show, "a round's leaderboard")
    board.add_argument("round", type=id_type(ROUND), metavar="ROUND")
    board.add_argument("--limit", type=count(1), default=100, metavar="N")
    board.add_argument(
        "--rebuild",
        action="store_true",
        help="first rewrite the board from the round's records (after an upgrade of the ranking rule)",
    )

    purse = leaf(sub, "wallet", commands.wallet_show, "a player's balances and ledger")
    purse.add_argument("player", type=id_type(PLAYER), metavar="PLAYER")
    purse.add_argument("--ledger", type=count(0), default=10, metavar="N", help="show the last N entries")

    give_back = leaf(
        sub,
        "refund",
        commands.refund_run,
        "refund dead guesses once (all of the dead set, or the JOBs named)",
    )
    give_back.add_argument("jobs", nargs="*", type=id_type(JOB), metavar="JOB")
    acl.add_parser(sub, common)

    where = sub.add_parser(
        "redis-url",
        parents=[common],
        help="print the URL of serve's embedded Redis for the command-line tools (export REDIS_URL=...)",
    )
    where.set_defaults(run=None)
    where.add_argument(
        "--data-dir", default=".codemojex-data", metavar="DIR", help="serve's data folder (%(default)s)"
    )
    where.add_argument(
        "--role",
        choices=["operator", "admin"],
        default="operator",
        help="whose user: the operator's (rounds, players, guesses, the worker; default) or serve's admin",
    )

    processes.add_serve(sub, common)
    processes.add_conformance(sub, common)

    worker = leaf(sub, "worker", commands.worker_run, "run the score worker until SIGTERM / SIGINT")
    worker.add_argument("--concurrency", type=int, default=10)
    worker.add_argument("--lease-ms", type=int, default=30_000)
    worker.add_argument("--sweep-every", type=float, default=SWEEP_PERIOD_S, metavar="SECONDS")
    worker.add_argument("--grace", type=float, default=10.0, metavar="SECONDS")
    worker.add_argument(
        "--partitions",
        type=count(1, MAX_PARTITIONS),
        default=0,
        metavar="P",
        help="score a spread game over tags <tag>.0 ... <tag>.<P-1> (codemojex.spread; 1: one game)",
    )
    for flag, default in (("result-ttl-ms", "1 h"), ("dedup-window-ms", "24 h"), ("dead-ttl-ms", "180 d")):
        worker.add_argument(
            f"--{flag}", type=count(0), default=None, metavar="MS", help=f"the bus's (default {default})"
        )
    return parser

"""The ``codemojex`` command: open and close rounds, register players, guess, lock, read the board and the
wallet, and run the score worker. Until a web host arrives, this is how a person plays.

``--redis-url`` (else ``REDIS_URL``, else ``redis://127.0.0.1:6379/0``) selects the server and ``--tag``
the bus (default ``cm``), as for ``echomq``. ``--json`` makes every command print one JSON document on
stdout instead of the readable form; the global options may also follow the command.

Exit codes, as ``echomq``'s: 0 done; 1 a thing not found, a refusal (a refused guess, a lock on an
unproven position, a closed round, a guess not scored within ``--wait``) or Redis unreachable; 2 bad
input (an ill-formed id, a bad option, a bad keyboard). An error is one line on stderr,
``codemojex: error: CODE: message``, with nothing on stdout; a refusal is an outcome, printed on stdout
(in JSON too) like any other. No error ends in a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import math
import sys
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

import redis.exceptions

from codemojex import guesses, leaderboard, locks, players, rounds, wallet
from codemojex import keyboard as kb
from codemojex.engine import LENGTH, Feedback, Mark
from codemojex.errors import CodemojexError, InvalidInput, NotFound, NotProven, Unavailable
from codemojex.game import Game, Prices, check_amount, check_currency, translate_errors
from codemojex.guesses import GuessRecord, Outcome, Submission
from codemojex.keys import JOB, PLAYER, ROUND, check_id, guess_of
from codemojex.score_worker import ScoreWorker
from echomq import logs
from echomq.bus import DEFAULT_TAG
from echomq.cli import DEFAULT_URL, EXIT_FAILURE, EXIT_USAGE
from echomq.cli import redis_url as env_redis_url
from echomq.errors import EchoMQError, RedisUnavailable, UnknownJob
from echomq.errors import InvalidInput as BusInvalidInput
from echomq.states import JobState
from echomq.worker import SWEEP_PERIOD_S, Worker

PROG = "codemojex"
EXIT_OK = 0
EXIT_INTERRUPTED = 130
POLL_S = 0.1  # how often --wait looks for the guess record
SQUARES = {Mark.HIT: "🟩", Mark.NEAR: "🟨", Mark.MISS: "⬜"}


class UsageError(Exception):
    """Bad command-line input found after parsing (a REDIS_URL redis-py cannot read): exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{PROG}: error: {message} (see {self.prog} --help)\n")


@dataclass(slots=True)
class Result:
    """What a command prints: ``data`` with --json, else ``lines``; and its exit code."""

    data: Any
    lines: list[str] = field(default_factory=list)
    code: int = EXIT_OK


# ---- argparse types: ill-formed input exits 2 before anything touches Redis ----


def _id_type(brand: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return check_id(text, brand)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = f"{brand} id"
    return parse


def _position(text: str) -> int:
    """A 1-based position of the code, 1 to 6."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= LENGTH:
        raise argparse.ArgumentTypeError(f"a position is a whole number from 1 to {LENGTH}, got {text!r}")
    return value


def _count(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {text!r}")
        return value

    parse.__name__ = "count"
    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def _price(text: str) -> tuple[str, int]:
    """``CURRENCY=AMOUNT``, e.g. ``ticket=1``."""
    currency, sep, amount = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"a price is CURRENCY=AMOUNT (e.g. ticket=1), got {text!r}")
    try:
        value = int(amount)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a price's amount is a whole number, got {amount!r}") from None
    try:
        return check_currency(currency), check_amount("a price's amount", value)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# ---- readable output ----


def _width(text: str) -> int:
    """The columns ``text`` takes in a terminal: an emoji takes two, combining marks none."""
    total = 0
    for cluster in kb.graphemes(text):
        if kb.is_emoji(cluster):
            total += 2
            continue
        for char in cluster:
            if unicodedata.combining(char) or unicodedata.category(char) in {"Mn", "Me", "Cf"}:
                continue
            total += 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1
    return total


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Aligned columns, two spaces apart; the last column is not padded."""
    cells = [[str(cell) for cell in row] for row in [headers, *rows]]
    widths = [max(_width(row[col]) for row in cells) for col in range(len(headers))]
    return [
        "  ".join(_pad(cell, widths[col]) if col < len(row) - 1 else cell for col, cell in enumerate(row))
        for row in cells
    ]


def _fields(pairs: Sequence[tuple[str, object]]) -> list[str]:
    """``label  value`` lines with the labels aligned."""
    width = max(len(label) for label, _ in pairs)
    return [f"{label:<{width}}  {value}" for label, value in pairs]


def _time(ms: int | None, absent: str = "-") -> str:
    if ms is None:
        return absent
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _keys(keys: Sequence[str]) -> str:
    return " ".join(keys)


def _prices_text(prices: Prices) -> str:
    return ", ".join(f"{currency}={amount}" for currency, amount in prices)


def _charge_text(charge: tuple[str, int] | None) -> str:
    return "nothing" if charge is None else f"{charge[1]} {charge[0]}"


def _squares(feedback: Feedback) -> str:
    return " ".join(SQUARES[mark] for mark in feedback.marks)


def _shown_url(url: str) -> str:
    """``url`` without its password, for error messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# ---- JSON shapes ----


def _prices_json(prices: Prices) -> list[dict[str, Any]]:
    return [{"currency": currency, "amount": amount} for currency, amount in prices]


def _charge_json(charge: tuple[str, int] | None) -> dict[str, Any] | None:
    return None if charge is None else {"currency": charge[0], "amount": charge[1]}


def _round_json(the_round: rounds.Round, now_ms: int) -> dict[str, Any]:
    return {
        "id": the_round.id,
        "status": the_round.status_at(now_ms).value,
        "keyboard": list(the_round.keyboard.keys),
        "length": the_round.length,
        "prices": _prices_json(the_round.prices),
        "created_ms": the_round.created_ms,
        "opens_ms": the_round.opens_ms,
        "closes_ms": the_round.closes_ms,
        "closed_ms": the_round.closed_ms,
        "max_guesses": the_round.max_guesses,
        "now_ms": now_ms,
    }


def _feedback_json(record: GuessRecord) -> dict[str, Any]:
    feedback = record.feedback
    return {
        "guess_id": record.id,
        "code": feedback.code(),
        "marks": [mark.value for mark in feedback.marks],
        "hits": feedback.hits,
        "nears": feedback.nears,
        "misses": feedback.misses,
        "solved": feedback.solved,
        "attempt": record.attempt,
        "counted": record.counted,
        "scored_ms": record.scored_ms,
    }


def _feedback_lines(guess: Sequence[str], record: GuessRecord) -> list[str]:
    feedback = record.feedback
    verdict = "solved!" if feedback.solved else f"hits {feedback.hits}  nears {feedback.nears}"
    counted = f"attempt {record.attempt}" if record.counted else "not counted (after the solve)"
    return [f"  {_keys(guess)}", f"  {_squares(feedback)}", f"  {verdict}  ({counted})"]


# ---- commands ----


def _round_lines(data: dict[str, Any], the_round: rounds.Round) -> list[str]:
    pairs: list[tuple[str, object]] = [
        ("round", the_round.id),
        ("status", data["status"]),
        ("keyboard", _keys(the_round.keyboard.keys)),
        ("prices", _prices_text(the_round.prices) + "  (the first the wallet can pay)"),
        ("opens", _time(the_round.opens_ms)),
        ("closes", _time(the_round.closes_ms, "when closed")),
    ]
    if the_round.closed_ms is not None:
        pairs.append(("closed", _time(the_round.closed_ms)))
    pairs.append(("max guesses", the_round.max_guesses or "no limit"))
    if "players" in data:
        pairs.append(("players", data["players"]))
    if "secret" in data:
        shown = _keys(data["secret"]) if data["secret"] is not None else "(revealed after the close)"
        pairs.append(("secret", shown))
    return _fields(pairs)


async def _round_open(game: Game, args: argparse.Namespace) -> Result:
    keyboard = None if args.keyboard is None else "".join(args.keyboard.split())
    the_round = await rounds.open_round(
        game,
        keyboard=keyboard,
        size=args.size,
        prices=args.prices,
        delay_s=args.delay,
        duration_s=args.duration,
        max_guesses=args.max_guesses,
    )
    data = _round_json(the_round, await rounds.server_ms(game))
    return Result(data, _round_lines(data, the_round))


async def _round_close(game: Game, args: argparse.Namespace) -> Result:
    closed_ms = await rounds.close_round(game, args.round)
    secret = await rounds.reveal_secret(game, args.round)
    data = {"id": args.round, "status": "closed", "closed_ms": closed_ms, "secret": list(secret)}
    lines = _fields([("round", args.round), ("closed", _time(closed_ms)), ("secret", _keys(secret))])
    return Result(data, lines)


async def _round_show(game: Game, args: argparse.Namespace) -> Result:
    if args.round is None:
        found = await rounds.current_round(game)
        if found is None:
            raise NotFound("no round is open now; name one (codemojex round list)")
        the_round = found
    else:
        the_round = await rounds.get_round(game, args.round)
    now_ms = await rounds.server_ms(game)
    data = _round_json(the_round, now_ms)
    with translate_errors():
        data["players"] = int(await game.redis.zcard(game.keys.board(the_round.id)))
    closed = the_round.status_at(now_ms) is rounds.RoundStatus.CLOSED
    data["secret"] = list(await rounds.reveal_secret(game, the_round.id)) if closed else None
    return Result(data, _round_lines(data, the_round))


async def _round_list(game: Game, args: argparse.Namespace) -> Result:
    listed = await rounds.list_rounds(game, args.limit)
    now_ms = await rounds.server_ms(game)
    data = [_round_json(the_round, now_ms) for the_round in listed]
    if not listed:
        return Result(data, [f"no rounds on bus {game.bus.tag}"])
    rows = [
        [
            r["id"],
            r["status"],
            _time(r["opens_ms"]),
            _time(r["closes_ms"], "when closed"),
            _keys(r["keyboard"]),
        ]
        for r in data
    ]
    return Result(data, _table(["round", "status", "opens", "closes", "keyboard"], rows))


async def _player_new(game: Game, args: argparse.Namespace) -> Result:
    player = await players.register(game, args.name)
    purse = await wallet.read_wallet(game, player.id, ledger_limit=1)
    data = {"id": player.id, "name": player.name, "created_ms": player.created_ms, "wallet": purse.balances}
    balances = ", ".join(f"{amount} {currency}" for currency, amount in purse.balances.items())
    lines = _fields([("player", player.id), ("name", player.name), ("wallet", balances)])
    return Result(data, lines)


async def _job_state(game: Game, job: str) -> tuple[str | None, str | None]:
    """The job's state and last error, or (None, None) if it has no row."""
    with translate_errors():
        try:
            info = await game.bus.inspect(job)
        except UnknownJob:
            return None, None
    return info.state.value, info.error


async def _wait_scored(game: Game, job: str, wait_s: float) -> tuple[GuessRecord | None, str | None]:
    """Poll until the guess record of ``job`` exists (or the job is dead, or ``wait_s`` passed): the
    record, or None and the job's last state."""
    deadline = time.monotonic() + wait_s
    guess_id = guess_of(job)
    while True:
        record = await guesses.get_guess(game, guess_id)
        if record is not None:
            return record, None
        state, _ = await _job_state(game, job)
        left = deadline - time.monotonic()
        if state == JobState.DEAD.value or left <= 0:
            record = await guesses.get_guess(game, guess_id)  # scored just now?
            return record, None if record is not None else state
        await asyncio.sleep(min(POLL_S, left))


def _submission_json(sub: Submission, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "outcome": sub.outcome.value,
        "round": args.round,
        "player": args.player,
        "job": sub.job,
        "guess": None if sub.guess is None else list(sub.guess),
        "charged": _charge_json(sub.charged),
        "refusal": None if sub.refusal is None else sub.refusal.value,
        "problem": sub.problem or None,
        "detail": sub.detail or None,
        "state": None,  # with --wait: scored, or the job's state when the wait ended
        "feedback": None,  # with --wait: the feedback once scored
    }


async def _guess(game: Game, args: argparse.Namespace) -> Result:
    typed = "".join(args.emoji)
    sub = await guesses.submit(game, args.round, args.player, typed, job_id=args.job)
    data = _submission_json(sub, args)
    if sub.outcome is Outcome.REFUSED:
        reason = sub.refusal.value if sub.refusal is not None else "refused"
        if sub.problem:
            reason += f" ({sub.problem})"
        lines = [f"refused: {reason}"]
        if sub.detail and sub.detail != reason.replace("_", " "):
            lines.append(f"  {sub.detail}")
        lines.append(f"job {sub.job}  charged nothing")
        return Result(data, lines, EXIT_FAILURE)
    assert sub.job is not None
    assert sub.guess is not None
    head = "admitted" if sub.outcome is Outcome.ADMITTED else "duplicate (admitted before; nothing changed)"
    lines = [head, f"job {sub.job}  charged {_charge_text(sub.charged)}"]
    if args.wait is None:
        return Result(data, [*lines, f"  {_keys(sub.guess)}"])
    record, state = await _wait_scored(game, sub.job, args.wait)
    if record is not None:
        data.update(state="scored", feedback=_feedback_json(record))
        return Result(data, lines + _feedback_lines(sub.guess, record))
    data["state"] = state
    lines.append(f"  {_keys(sub.guess)}")
    if state == JobState.DEAD.value:
        _, error = await _job_state(game, sub.job)
        data["error"] = error
        lines.append(f"not scored: the job is dead ({error})")
    else:
        lines.append(f"not scored within {args.wait:g} s (state {state}; is a worker running?)")
    return Result(data, lines, EXIT_FAILURE)


def _positions_json(positions: dict[int, str]) -> dict[str, str]:
    return {str(position + 1): key for position, key in positions.items()}


def _positions_text(positions: dict[int, str]) -> str:
    return "  ".join(f"{position + 1}={key}" for position, key in positions.items()) or "none"


async def _guesses(game: Game, args: argparse.Namespace) -> Result:
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
                "feedback": None if record is None else _feedback_json(record),
            }
        )
        marks = "" if record is None else _squares(record.feedback)
        counts = "" if record is None else f"{record.feedback.hits}/{record.feedback.nears}"
        rows.append([number, item.job, item.state, counts, _keys(item.guess), marks])
    data = {
        "round": args.round,
        "player": args.player,
        "name": player.name,
        "guesses": entries,
        "locks": _positions_json(held),
        "proven": _positions_json(proven),
    }
    lines = [f"{player.name} ({args.player}) in round {args.round}"]
    if rows:
        lines += _table(["#", "job", "state", "hits/nears", "guess", "feedback"], rows)
    else:
        lines.append("no guesses yet")
    lines += [f"proven: {_positions_text(proven)}", f"locked: {_positions_text(held)}"]
    return Result(data, lines)


async def _lock(game: Game, args: argparse.Namespace) -> Result:
    await players.get_player(game, args.player)
    try:
        key = await locks.lock(game, args.round, args.player, args.position - 1)
    except NotProven:  # its message counts positions from 0; the command counts them from 1
        raise NotProven(
            f"position {args.position} is not a proven hit of yours in round {args.round}"
        ) from None
    data = {"round": args.round, "player": args.player, "position": args.position, "key": key, "locked": True}
    return Result(data, [f"position {args.position} locked to {key}"])


async def _unlock(game: Game, args: argparse.Namespace) -> Result:
    await rounds.get_round(game, args.round)
    await players.get_player(game, args.player)
    removed = await locks.unlock(game, args.round, args.player, args.position - 1)
    data = {"round": args.round, "player": args.player, "position": args.position, "unlocked": removed}
    if removed:
        return Result(data, [f"position {args.position} unlocked"])
    return Result(data, [f"position {args.position} was not locked"], EXIT_FAILURE)


async def _board(game: Game, args: argparse.Namespace) -> Result:
    await rounds.get_round(game, args.round)
    entries = await leaderboard.read_board(game, args.round, args.limit)
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
        return Result(data, [f"no scored guesses in round {args.round} yet"])
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
    return Result(data, _table(["rank", "name", "solved", "hits", "nears", "attempts", "player"], rows))


async def _wallet(game: Game, args: argparse.Namespace) -> Result:
    player = await players.get_player(game, args.player)
    purse = await wallet.read_wallet(game, args.player)  # the whole ledger: reconcile replays it all
    whole = len(purse.ledger) < wallet.MAX_LEDGER
    problems = wallet.reconcile(purse) if whole else []
    shown = purse.ledger[-args.ledger :] if args.ledger else ()
    data = {
        "player": args.player,
        "name": player.name,
        "balances": purse.balances,
        "ledger": [asdict(entry) for entry in shown],
        "ledger_entries": len(purse.ledger) if whole else None,
        "reconciles": not problems if whole else None,
        "problems": problems,
    }
    lines = [f"{player.name} ({args.player})"]
    lines += _fields([(currency, amount) for currency, amount in purse.balances.items()] or [("(empty)", "")])
    if shown:
        lines.append(f"ledger, the last {len(shown)} of {len(purse.ledger)} entries:")
        rows = [
            [_time(e.at_ms), e.currency, f"{e.delta:+d}", e.balance, e.reason, e.job or "-"] for e in shown
        ]
        lines += [
            "  " + line for line in _table(["at", "currency", "delta", "balance", "reason", "job"], rows)
        ]
    if not whole:
        lines.append(f"reconciles: not checked (the ledger has {wallet.MAX_LEDGER} entries or more)")
    elif problems:
        lines.append("reconciles: NO")
        lines += [f"  {problem}" for problem in problems]
    else:
        lines.append("reconciles: yes")
    return Result(data, lines)


async def _worker(game: Game, args: argparse.Namespace) -> Result:
    worker = Worker(
        game.bus,
        ScoreWorker(game).handle,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        sweep_every_s=args.sweep_every,
        grace_s=args.grace,
    )
    await worker.run(handle_signals=True)
    data = {"owner": worker.owner, "tag": game.bus.tag, "counts": asdict(worker.counts)}
    return Result(data, [])  # the readable record is the log (worker.started ... worker.stopped)


# ---- the parser ----

Command = Callable[[Game, argparse.Namespace], Coroutine[Any, Any, Result]]


def _parser() -> argparse.ArgumentParser:
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
        return command

    round_group = sub.add_parser("round", help="open, close, show and list rounds").add_subparsers(
        dest="round_command", required=True, metavar="ROUND_COMMAND"
    )
    round_open = leaf(round_group, "open", _round_open, "open a round (its secret stays secret)")
    board_kind = round_open.add_mutually_exclusive_group()
    board_kind.add_argument("--size", type=int, default=None, metavar="N", help="random keyboard of N emoji")
    board_kind.add_argument(
        "--keyboard", default=None, metavar="EMOJI", help="the keyboard's emoji, in order"
    )
    round_open.add_argument(
        "--price",
        dest="prices",
        action="append",
        type=_price,
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
    round_close = leaf(round_group, "close", _round_close, "close a round now and reveal its secret")
    round_close.add_argument("round", type=_id_type(ROUND), metavar="ROUND")
    round_show = leaf(round_group, "show", _round_show, "one round (default: the one open now)")
    round_show.add_argument("round", nargs="?", type=_id_type(ROUND), default=None, metavar="ROUND")
    round_list = leaf(round_group, "list", _round_list, "the latest rounds, newest first")
    round_list.add_argument("--limit", type=_count(1), default=20, metavar="N")

    player_group = sub.add_parser("player", help="register players").add_subparsers(
        dest="player_command", required=True, metavar="PLAYER_COMMAND"
    )
    player_new = leaf(player_group, "new", _player_new, "register a player, with the starting grant")
    player_new.add_argument("name", metavar="NAME")

    guess = leaf(sub, "guess", _guess, "guess the code of a round")
    guess.add_argument("round", type=_id_type(ROUND), metavar="ROUND")
    guess.add_argument("player", type=_id_type(PLAYER), metavar="PLAYER")
    guess.add_argument(
        "emoji", nargs="+", metavar="EMOJI", help="six emoji, together or apart; _ is a blank a lock fills"
    )
    guess.add_argument("--job", type=_id_type(JOB), default=None, metavar="JOB", help="retry with this id")
    guess.add_argument(
        "--wait", type=_seconds, default=None, metavar="SECONDS", help="wait for the feedback this long"
    )

    listing = leaf(sub, "guesses", _guesses, "a player's guesses in a round, with their feedback")
    listing.add_argument("round", type=_id_type(ROUND), metavar="ROUND")
    listing.add_argument("player", type=_id_type(PLAYER), metavar="PLAYER")
    listing.add_argument("--limit", type=_count(1), default=200, metavar="N", help="the latest N")

    for name, run, help_text in (
        ("lock", _lock, "lock a position a scored guess proved a hit"),
        ("unlock", _unlock, "remove a lock"),
    ):
        command = leaf(sub, name, run, help_text)
        command.add_argument("round", type=_id_type(ROUND), metavar="ROUND")
        command.add_argument("player", type=_id_type(PLAYER), metavar="PLAYER")
        command.add_argument("position", type=_position, metavar="POSITION", help=f"1 to {LENGTH}")

    board = leaf(sub, "board", _board, "a round's leaderboard")
    board.add_argument("round", type=_id_type(ROUND), metavar="ROUND")
    board.add_argument("--limit", type=_count(1), default=100, metavar="N")

    purse = leaf(sub, "wallet", _wallet, "a player's balances and ledger")
    purse.add_argument("player", type=_id_type(PLAYER), metavar="PLAYER")
    purse.add_argument("--ledger", type=_count(0), default=10, metavar="N", help="show the last N entries")

    worker = leaf(sub, "worker", _worker, "run the score worker until SIGTERM / SIGINT")
    worker.add_argument("--concurrency", type=int, default=10)
    worker.add_argument("--lease-ms", type=int, default=30_000)
    worker.add_argument("--sweep-every", type=float, default=SWEEP_PERIOD_S, metavar="SECONDS")
    worker.add_argument("--grace", type=float, default=10.0, metavar="SECONDS")
    return parser


# ---- running ----


def _url(args: argparse.Namespace) -> str:
    url: str | None = args.redis_url
    return url or env_redis_url()


def _pool_size(args: argparse.Namespace) -> int | None:
    """A worker's handlers each hold a connection, beside its claims and completions: size the pool for
    them (redis-py's default of 100 fails calls past it instead of waiting)."""
    concurrency = getattr(args, "concurrency", None)
    return None if concurrency is None else 2 * int(concurrency) + 16


async def _run(args: argparse.Namespace) -> Result:
    try:
        game = Game.from_url(_url(args), tag=args.tag, cluster=args.cluster, max_connections=_pool_size(args))
    except (EchoMQError, CodemojexError):
        raise
    except ValueError as exc:  # redis-py cannot read the URL
        raise UsageError(f"bad Redis URL: {exc}") from None
    run: Command = args.run
    async with game:
        return await run(game, args)


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no message)"


def explain(exc: BaseException, url: str) -> tuple[int, str]:
    """The exit code and the one-line message for an error that ends a command."""
    unreachable = (
        Unavailable,
        RedisUnavailable,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
        redis.exceptions.RedisClusterException,
    )
    if isinstance(exc, unreachable):
        return EXIT_FAILURE, f"{PROG}: error: unavailable: {_one_line(str(exc))} (server {_shown_url(url)})"
    if isinstance(exc, UsageError):
        return EXIT_USAGE, f"{PROG}: error: {_one_line(str(exc))}"
    if isinstance(exc, CodemojexError):
        code = EXIT_USAGE if isinstance(exc, InvalidInput) else EXIT_FAILURE
        return code, f"{PROG}: error: {exc.code}: {_one_line(str(exc))}"
    if isinstance(exc, BusInvalidInput):
        return EXIT_USAGE, f"{PROG}: error: invalid_input: {_one_line(str(exc))}"
    return EXIT_FAILURE, f"{PROG}: error: {type(exc).__name__}: {_one_line(str(exc))}"


def _tolerant(stream: object) -> None:
    """Never fail on an emoji a terminal's encoding cannot show: escape it instead."""
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="backslashreplace")


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``codemojex``; returns the exit code."""
    _tolerant(sys.stdout)
    _tolerant(sys.stderr)
    args = _parser().parse_args(argv)
    handler = logs.configure(args.log_level)
    game_logger = logging.getLogger("codemojex")  # the score worker's own records, in the same form
    game_logger.addHandler(handler)
    game_logger.setLevel(args.log_level)
    try:
        result = asyncio.run(_run(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001  (the promise: no error ends in a traceback, a bug neither)
        code, message = explain(exc, _url(args))
        print(message, file=sys.stderr)
        return code
    if args.json:
        _print_json(result.data)
    else:
        for line in result.lines:
            print(line)
    return result.code


if __name__ == "__main__":
    sys.exit(main())

"""Rounds (``RND``): open one with a keyboard, a secret drawn with a CSPRNG and a price list; close it;
reveal its secret only after the close.

Every time is the Redis server's clock (``TIME``), as the queue's leases are: a round opens at server
now + ``delay_s`` and closes at its close time or when :func:`close_round` is called, whichever is first.
The secret lives in its own key (outside the web host's Redis key patterns, :mod:`codemojex.access`),
which only the score worker and :func:`reveal_secret` (the operator's tools, after the close) read;
:func:`get_round` never returns it. A closed round's secret is copied to its *revealed* key, which the
host reads (:func:`read_revealed`): by ``close_round.lua`` when a call closes it, and by the worker's
:func:`reveal_closed` pass when its close time passed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from codemojex import codes
from codemojex import keyboard as kb
from codemojex.engine import LENGTH
from codemojex.errors import CodemojexError, InvalidOption, RoundClosed, UnknownRound
from codemojex.game import (
    Game,
    Prices,
    check_int,
    check_prices,
    decode_prices,
    encode_prices,
    translate_errors,
)
from codemojex.keys import OPERATION, ROUND, check_id
from echomq import ids

log = logging.getLogger("codemojex.rounds")

MAX_DURATION_S = 366 * 24 * 3600
MAX_GUESSES_LIMIT = 100_000


class RoundStatus(StrEnum):
    SCHEDULED = "scheduled"  # opens later
    OPEN = "open"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class Round:
    """A round as stored (never its secret)."""

    id: str
    keyboard: kb.Keyboard
    length: int
    prices: Prices
    created_ms: int
    opens_ms: int
    closes_ms: int | None  # None: open until closed
    closed_ms: int | None  # set once closed by a call (or found past its close time by one)
    max_guesses: int | None  # per player; None: no limit

    def status_at(self, now_ms: int) -> RoundStatus:
        if self.closed_ms is not None or (self.closes_ms is not None and now_ms >= self.closes_ms):
            return RoundStatus.CLOSED
        if now_ms < self.opens_ms:
            return RoundStatus.SCHEDULED
        return RoundStatus.OPEN


async def server_ms(game: Game) -> int:
    """Now on the Redis server's clock, in ms."""
    with translate_errors():
        seconds, micros = await game.redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


def check_seconds(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise InvalidOption(f"{name} is a number of seconds in [{low}, {high}], got {value!r}")
    return float(value)


async def open_round(
    game: Game,
    *,
    keyboard: kb.Keyboard | str | list[str] | None = None,
    size: int | None = None,
    prices: object = None,
    delay_s: float = 0,
    duration_s: float | None = None,
    max_guesses: int | None = None,
    secret: list[str] | tuple[str, ...] | None = None,
    round_id: str | None = None,
    opens_at_ms: int | None = None,
) -> Round:
    """Open a round; defaults: a random keyboard of ``settings.keyboard_size`` emoji, the settings' price
        list, open now, until closed, no guess limit, a secret drawn with :mod:`secrets`. ``secret`` may be
        given (an operator's fixed puzzle, and tests); it must be six keys of the keyboard. ``round_id`` is
    minted here unless given (:mod:`codemojex.round_jobs` mints it on the host). ``opens_at_ms`` (on the
    server clock, instead of ``delay_s``) opens it at that instant: a round spread over partitions
    (:mod:`codemojex.spread`) opens and closes at the same instant in each.

        A lost reply: the round may or may not exist, and a new call opens another one. redis-py's own retry
        of the command after a timeout reuses the same id and arguments, so it makes no second round and
        answers the first one's times."""
    if keyboard is None:
        board = kb.random_keyboard(game.settings.keyboard_size if size is None else size)
    elif size is not None:
        raise InvalidOption("give a keyboard or a size, not both")
    else:
        board = keyboard if isinstance(keyboard, kb.Keyboard) else kb.Keyboard.of(keyboard)
    price_list = game.settings.prices if prices is None else check_prices(prices)
    delay = check_seconds("delay_s", delay_s, 0, MAX_DURATION_S)
    duration = 0.0 if duration_s is None else check_seconds("duration_s", duration_s, 1, MAX_DURATION_S)
    if max_guesses is not None:
        check_int("max_guesses", max_guesses, 1, MAX_GUESSES_LIMIT)
    if opens_at_ms is not None:
        check_int("opens_at_ms", opens_at_ms, 1, 2**53)
        if delay:
            raise InvalidOption("give a delay or an opening time, not both")
    code = codes.draw_secret(board, LENGTH) if secret is None else codes.parse_guess(list(secret), board)
    round_id = ids.mint(ROUND) if round_id is None else check_id(round_id, ROUND)
    keys = game.keys
    reply = await game.run(
        "open_round",
        [keys.round(round_id), keys.secret(round_id), keys.rounds, keys.live],
        [
            round_id,
            json.dumps(list(board.keys), ensure_ascii=False),
            LENGTH,
            encode_prices(price_list),
            int(delay * 1000),
            int(duration * 1000),
            max_guesses or 0,
            json.dumps(list(code), ensure_ascii=False),
            opens_at_ms or 0,
        ],
    )
    if int(reply[0]) != 1:  # a freshly minted id names this call alone (1 also on a retried run)
        raise InvalidOption(f"a round {round_id} exists with other settings: nothing changed")
    return await get_round(game, round_id)


@lru_cache(maxsize=256)
def keyboard_of(stored: bytes) -> kb.Keyboard:
    """The keyboard a round row stores (JSON), validated once per distinct keyboard (submit reads it on
    every guess; a Keyboard is immutable, so one instance serves every caller)."""
    return kb.Keyboard.of(json.loads(stored))


def round_from_row(round_id: str, row: dict[bytes, bytes]) -> Round:
    def opt(field: bytes) -> int | None:
        value = int(row.get(field, b"0"))
        return value or None

    return Round(
        id=round_id,
        keyboard=keyboard_of(row[b"keyboard"]),
        length=int(row[b"length"]),
        prices=decode_prices(row[b"prices"].decode()),
        created_ms=int(row[b"created"]),
        opens_ms=int(row[b"opens"]),
        closes_ms=opt(b"closes"),
        closed_ms=opt(b"closed"),
        max_guesses=opt(b"max_guesses"),
    )


async def get_round(game: Game, round_id: str) -> Round:
    """The round ``round_id``; :class:`UnknownRound` if there is none, :class:`InvalidId` if ill-formed."""
    key = game.keys.round(round_id)
    with translate_errors():
        row: dict[bytes, bytes] = await game.redis.hgetall(key)
    if not row:
        raise UnknownRound(f"no round {round_id}")
    return round_from_row(round_id, row)


async def list_rounds(game: Game, limit: int = 20) -> list[Round]:
    """The ``limit`` most recently opened rounds, newest first."""
    check_int("limit", limit, 1, 1000)
    with translate_errors():
        round_ids = [raw.decode() for raw in await game.redis.zrevrange(game.keys.rounds, 0, limit - 1)]
    return await _rounds_of(game, round_ids)


async def live_rounds(game: Game, limit: int = 1000) -> list[Round]:
    """The rounds not concluded yet (open, opening later, or closed and waiting for their conclusion:
    the ``live`` index, which conclude_round.lua leaves), at most ``limit``, newest opening first;
    however many rounds were opened after them. Rounds opened before the index are not in it (see
    :func:`codemojex.history.conclude_closed`, which also looks at the newest rounds)."""
    check_int("limit", limit, 1, 1000)
    with translate_errors():
        round_ids = [raw.decode() for raw in await game.redis.zrevrange(game.keys.live, 0, limit - 1)]
    return await _rounds_of(game, round_ids)


async def _rounds_of(game: Game, round_ids: list[str]) -> list[Round]:
    """The rounds of ``round_ids`` that exist, in that order."""
    if not round_ids:
        return []
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            for round_id in round_ids:
                pipe.hgetall(game.keys.round(round_id))
            rows = await pipe.execute()
    found = (_readable(round_id, row) for round_id, row in zip(round_ids, rows, strict=True) if row)
    return [the_round for the_round in found if the_round is not None]


def _readable(round_id: str, row: dict[bytes, bytes]) -> Round | None:
    """The round a stored row holds, or None (logged) for a row that cannot be read (a hand-edited or
    corrupted hash): one bad round must not hide every other from a listing, the lobby or the upkeep."""
    try:
        return round_from_row(round_id, row)
    except (CodemojexError, ValueError, KeyError, TypeError) as exc:
        log.warning("round %s cannot be read (%s: %s); left out", round_id, type(exc).__name__, exc)
        return None


async def current_round(game: Game) -> Round | None:
    """The most recently opened round that is open now (server clock), or None."""
    now = await server_ms(game)
    for candidate in await list_rounds(game, 50):
        if candidate.status_at(now) is RoundStatus.OPEN:
            return candidate
    return None


async def close_round(game: Game, round_id: str, *, operation: str | None = None, reveal: bool = True) -> int:
    """Close ``round_id`` now; its close time (server ms). :class:`RoundClosed` if it was closed already
    by another call (or its close time passed).

    The close is named by ``operation`` (an ``OPR`` id, minted per call when none is given). A lost
    reply: the round may or may not be closed; calling again with the same ``operation`` (redis-py's
    own retry after a timeout does) answers the close time this operation set, never RoundClosed."""
    op = ids.mint(OPERATION) if operation is None else check_id(operation, OPERATION)
    keys = game.keys
    reply = await game.run(
        "close_round",
        [keys.round(round_id), keys.secret(round_id), keys.revealed(round_id)],
        [check_id(round_id, ROUND), op, "1" if reveal else "0"],
    )
    code = int(reply[0])
    if code == -1:
        raise UnknownRound(f"no round {round_id}")
    if code == 0:
        raise RoundClosed(f"round {round_id} is already closed")
    return int(reply[1])


async def reveal_secret(game: Game, round_id: str) -> tuple[str, ...]:
    """The secret of a closed round (the operator's tools: a user that may read secrets); it reveals a
    round closed by its close time on the way. :class:`RoundClosed` while it is open."""
    the_round = await get_round(game, round_id)
    if the_round.status_at(await server_ms(game)) is not RoundStatus.CLOSED:
        raise RoundClosed(f"round {round_id} is not closed: its secret is revealed after the close")
    secret = await read_secret(game, round_id)
    with translate_errors():
        shown = json.dumps(list(secret), ensure_ascii=False)
        await game.redis.set(game.keys.revealed(round_id), shown, nx=True)
    return secret


async def read_revealed(game: Game, round_ids: list[str]) -> list[tuple[str, ...] | None]:
    """The revealed secrets of ``round_ids`` in one round trip (None: not revealed yet, e.g. a round
    whose close time passed a moment ago, until the worker's :func:`reveal_closed` pass). The web host
    reads these; it may not read a secret's own key."""
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            for round_id in round_ids:
                pipe.get(game.keys.revealed(round_id))
            raws = await pipe.execute()
    return [tuple(json.loads(raw)) if raw is not None else None for raw in raws]


async def reveal_closed(game: Game, limit: int = 50) -> list[str]:
    """Copy the secret of each of the ``limit`` latest rounds that is closed (by a call or by its close
    time) to its revealed key, once; the ids revealed now. Run by a process that may read secrets (the
    score worker, each sweep period); safe beside another (SET NX of a value that never changes)."""
    now = await server_ms(game)
    closed = [r.id for r in await list_rounds(game, limit) if r.status_at(now) is RoundStatus.CLOSED]
    if not closed:
        return []
    keys = game.keys
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            for round_id in closed:
                pipe.exists(keys.revealed(round_id))
            shown = await pipe.execute()
        missing = [round_id for round_id, there in zip(closed, shown, strict=True) if not there]
        revealed = []
        for round_id in missing:
            secret = await game.redis.get(keys.secret(round_id))
            if secret is not None and await game.redis.set(keys.revealed(round_id), secret, nx=True):
                revealed.append(round_id)
    return revealed


async def read_secret(game: Game, round_id: str) -> tuple[str, ...]:
    """The secret, open round or not: for a process that may read it (the score worker, the
    conformance suite's players, tests); the web host's user gets NOPERM."""
    with translate_errors():
        raw = await game.redis.get(game.keys.secret(round_id))
    if raw is None:
        raise UnknownRound(f"no round {round_id}")
    return tuple(json.loads(raw))

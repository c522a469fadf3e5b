"""Closed rounds: their compact summary, kept for good, and the history of them.

When a round has closed (by a call or by its close time on the server clock) the score worker's upkeep
pass (:mod:`codemojex.upkeep`) concludes it with ``conclude_round.lua``, once whatever the number of
workers or retries: its **summary** (the secret, the top :data:`WINNERS` of the final board with their
names, the numbers of players and scored guesses, its open / close times) goes in ``cmx:{t}:summaries``
and the round in the ``history`` zset (by close time); its secret is revealed; and a ``closed`` event
carrying the summary goes on the round's event stream, which the web host's event hub sends to everyone
watching the round (:mod:`codemojex.web.hub`): the page's winner announcement.

Guesses admitted before the close and still queued are waited for (at most :data:`SETTLE_GRACE_MS`),
so the final board counts them. A summary is a few hundred bytes; the per-guess data of the round is
purged after the retention (:mod:`codemojex.retention`), the summary never.

The summaries are in the host's key patterns (it serves them); the secret's own key is not
(:mod:`codemojex.access`), and a summary is written only once the round is closed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from codemojex import ranking, rounds
from codemojex.errors import CodemojexError, InvalidInput, ScriptError, UnknownRound
from codemojex.game import Game, check_int, translate_errors
from codemojex.keys import ROUND, check_id
from echomq import rows as bus_rows

log = logging.getLogger("codemojex.history")

WINNERS = 10  # entries of the final board kept in a summary
TIES_READ = 1000  # rounds closed in one millisecond that a history page looks through
SETTLE_GRACE_MS = 30_000  # after a close, how long queued guesses are waited for before concluding
CHECKED = 50  # the newest rounds each conclude pass looks at


@dataclass(frozen=True, slots=True)
class Winner:
    rank: int
    standing: ranking.Standing
    name: str


@dataclass(frozen=True, slots=True)
class Summary:
    """A closed round, for good (see the module doc)."""

    round_id: str
    keyboard: tuple[str, ...]
    secret: tuple[str, ...] | None
    opens_ms: int
    closes_ms: int | None
    closed_ms: int
    players: int
    guesses: int
    board: tuple[Winner, ...]


def parse_summary(raw: bytes | str) -> Summary:
    """The summary ``conclude_round.lua`` wrote (JSON)."""
    data: dict[str, Any] = json.loads(raw)
    board = []
    entries = data.get("board") or []  # Lua's cjson writes an empty list as {}
    for rank, (member, name) in enumerate(entries if isinstance(entries, list) else [], start=1):
        try:
            standing = ranking.parse_board_member(member)
        except InvalidInput:  # a member of the rule before solve time ranked first: not shown
            continue
        board.append(Winner(rank, standing, str(name)))
    secret = data.get("secret")
    return Summary(
        round_id=str(data["round_id"]),
        keyboard=tuple(data.get("keyboard") or ()),
        secret=tuple(secret) if isinstance(secret, list) else None,
        opens_ms=int(data["opens_ms"]),
        closes_ms=int(data["closes_ms"]) or None,
        closed_ms=int(data["closed_ms"]),
        players=int(data["players"]),
        guesses=int(data["guesses"]),
        board=tuple(board),
    )


async def conclude_round(game: Game, round_id: str) -> tuple[bool, Summary | None]:
    """Conclude ``round_id`` if it is closed: (concluded by this call, its summary); (False, None) while
    it is open or its queued guesses are waited for. :class:`UnknownRound` if there is none. Safe to call
    again, from any number of workers: the summary and the ``closed`` event are written once."""
    keys = game.keys
    check_id(round_id, ROUND)
    reply = await game.run(
        "conclude_round",
        [
            keys.round(round_id),
            keys.secret(round_id),
            keys.revealed(round_id),
            keys.board(round_id),
            keys.events(round_id),
            keys.quota(round_id),
            keys.scored(round_id),
            keys.charges(round_id),
            keys.refunds(round_id),
            keys.summaries,
            keys.history,
            keys.retained,
            keys.live,
        ],
        [
            round_id,
            WINNERS,
            game.settings.events_cap,
            f"{keys.prefix}player:",
            SETTLE_GRACE_MS,
            f"{game.bus.keys.prefix}job:",
        ],
    )
    code = int(reply[0])
    if code == -1:
        raise UnknownRound(f"no round {round_id}")
    if code in (0, 1):
        return code == 1, parse_summary(reply[1])
    if code in (2, 3):
        return False, None
    raise ScriptError(f"conclude_round.lua answered {reply!r}")


async def pending_guesses(game: Game, round_id: str) -> int:
    """Guesses of the round admitted and not scored (nor refunded) yet, as ``conclude_round.lua``
    counts them (0 or less: none): a refund marker ``recharged`` belongs to a scored guess, so it is
    not counted again, and a ``refunded`` one whose job was retried (no longer dead) is queued again."""
    keys = game.keys
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            pipe.hlen(keys.charges(round_id))
            pipe.zcard(keys.scored(round_id))
            pipe.hgetall(keys.refunds(round_id))
            charged, scored, markers = await pipe.execute()
        refunded = [job for job, marker in markers.items() if marker == b"refunded"]
        async with game.redis.pipeline(transaction=False) as pipe:
            for job in refunded:
                pipe.hmget(game.bus.keys.job(job.decode()), bus_rows.STATE, bus_rows.LANE)
            states = [bus_rows.state_of(state, lane) for state, lane in await pipe.execute()]
    settled = sum(1 for marker in markers.values() if marker not in (b"recharged", b"refunded"))
    settled += sum(1 for state in states if state in (None, b"dead"))
    return int(charged) - int(scored) - settled


async def conclude_closed(game: Game, limit: int = CHECKED) -> list[str]:
    """Conclude every closed round not concluded yet: those of the ``live`` index (every round opened
    by open_round.lua or schedule_round.lua until its conclusion, however many were opened after it)
    and, for rounds opened before that index, the ``limit`` newest; the ids concluded now."""
    now = await rounds.server_ms(game)
    listed = await rounds.live_rounds(game) + await rounds.list_rounds(game, limit)
    closed = list(dict.fromkeys(r.id for r in listed if r.status_at(now) is rounds.RoundStatus.CLOSED))
    if not closed:
        return []
    with translate_errors():
        there = await game.redis.hmget(game.keys.summaries, closed)
    concluded = []
    for round_id, summary in zip(closed, there, strict=True):
        if summary is None:
            try:
                now_done, _ = await conclude_round(game, round_id)
            except UnknownRound:  # purged meanwhile
                continue
            except CodemojexError as exc:  # this round only: the others are still concluded
                log.warning("round %s cannot be concluded: %s", round_id, exc)
                continue
            if now_done:
                concluded.append(round_id)
    return concluded


async def read_summary(game: Game, round_id: str, *, whole: bool = False) -> Summary | None:
    """The summary of ``round_id`` (None: not concluded, or no such round); ``whole``: a spread game's
    summary of the whole game, from its home partition (:mod:`codemojex.spread_upkeep`)."""
    check_id(round_id, ROUND)
    with translate_errors():
        raw = await game.redis.hget(_summaries(game, whole=whole), round_id)
    return parse_summary(raw) if raw is not None else None


def _summaries(game: Game, *, whole: bool) -> str:
    return game.keys.whole_summaries if whole else game.keys.summaries


async def list_history(
    game: Game,
    limit: int = 20,
    before_ms: int | None = None,
    before_round: str | None = None,
    *,
    whole: bool = False,
) -> list[Summary]:
    """The concluded rounds, newest close first (ties: greater round id first): ``limit`` of them after
    the cursor. The cursor is the last page's last round: ``before_ms`` its close time and
    ``before_round`` its id (rounds that closed in the same millisecond are then neither skipped nor
    repeated); ``before_ms`` alone pages back to rounds closed strictly before it. ``whole``: a spread
    game's history of the whole game (:func:`read_summary`)."""
    check_int("limit", limit, 1, 100)
    key = game.keys.whole_history if whole else game.keys.history
    with translate_errors():
        listed: list[bytes] = []
        if before_ms is None:
            listed = await game.redis.zrevrangebyscore(key, "+inf", "-inf", start=0, num=limit)
        else:
            at = check_int("before_ms", before_ms, 0, 2**53)
            if before_round is not None:
                last = check_id(before_round, ROUND).encode()
                ties = await game.redis.zrevrangebyscore(key, at, at, start=0, num=TIES_READ)
                listed = [member for member in ties if member < last][:limit]
            if len(listed) < limit:
                listed += await game.redis.zrevrangebyscore(
                    key, f"({at}", "-inf", start=0, num=limit - len(listed)
                )
        if not listed:
            return []
        raws = await game.redis.hmget(_summaries(game, whole=whole), listed)
    return [parse_summary(raw) for raw in raws if raw is not None]

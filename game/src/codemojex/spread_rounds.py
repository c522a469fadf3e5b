"""The rounds of a spread game (:mod:`codemojex.spread`): one round opened, closed and revealed in every
partition at the same instants.

A round is written to every partition when it opens: the same id, keyboard, prices, guess limit,
secret (for the score workers of each partition), opening and closing instants, read once from one
server's clock; each partition's scripts decide open or closed by their own server clock against them,
so every partition closes at the same instant (to the agreement of the servers' clocks). The home
partition (0) is written first by an opening and by an early close: every round anywhere is listed at
home (the upkeep copies it from there, :mod:`codemojex.spread_upkeep`), and a partition closed early
means the home is. The secret shows only once every partition holds the round closed.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from codemojex import codes, rounds
from codemojex import keyboard as kb
from codemojex.engine import LENGTH
from codemojex.errors import RoundClosed, UnknownRound
from codemojex.game import Game, GameSettings
from codemojex.keys import OPERATION, ROUND, check_id
from echomq import ids


class SpreadGame(Protocol):
    """What these calls use of a :class:`codemojex.spread.SpreadGame` (which imports this module)."""

    games: list[Game]
    settings: GameSettings

    async def check_layout(self) -> None: ...


async def open_round(
    spread: SpreadGame,
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
) -> rounds.Round:
    """Open one round in every partition, at the same instants (see the module doc); the arguments as
    :func:`codemojex.rounds.open_round`'s. To mend a lost reply or a crash midway, call again with the
    same arguments and the ``round_id``, ``keyboard``, ``secret`` and ``opens_at_ms`` this call used
    (the returned round's): a partition holding the round with other settings refuses it
    (InvalidOption) before any other is written, and a round closed meanwhile in a partition is closed
    in those the mend writes."""
    if keyboard is None:
        board = kb.random_keyboard(spread.settings.keyboard_size if size is None else size)
    else:
        board = keyboard if isinstance(keyboard, kb.Keyboard) else kb.Keyboard.of(keyboard)
    code = codes.draw_secret(board, LENGTH) if secret is None else codes.parse_guess(list(secret), board)
    round_id = ids.mint(ROUND) if round_id is None else check_id(round_id, ROUND)
    await spread.check_layout()
    if opens_at_ms is None:
        delay_ms = round(rounds.check_seconds("delay_s", delay_s, 0, rounds.MAX_DURATION_S) * 1000)
        opens_at_ms = await rounds.server_ms(spread.games[0]) + delay_ms

    async def open_in(game: Game) -> rounds.Round:
        return await rounds.open_round(
            game, keyboard=board, prices=prices, duration_s=duration_s, max_guesses=max_guesses,
            secret=list(code), round_id=round_id, opens_at_ms=opens_at_ms,
        )  # fmt: skip

    # The home first (any round anywhere is listed at home, where the upkeep copies it from: a call
    # cut off after it leaves the rest to the next pass, :func:`codemojex.spread_upkeep.copy_live`);
    # on a mend the partitions holding the round answer first, so one with other settings refuses
    # before any other is written; a round closed meanwhile is closed in those written now.
    home = spread.games[0]
    found = await asyncio.gather(*(_round_or_none(game, round_id) for game in spread.games))
    if found[0] is None:
        await open_in(home)
    first = [game for game, there in zip(spread.games, found, strict=True) if there is not None]
    rest = [game for game, there in zip(spread.games[1:], found[1:], strict=True) if there is None]
    for game in first:
        await open_in(game)
    await asyncio.gather(*(open_in(game) for game in rest))
    now_home = await rounds.get_round(home, round_id)
    if rest and (now_home.closed_ms is not None or any(f is not None and f.closed_ms for f in found)):
        with contextlib.suppress(RoundClosed):
            await close_round(spread, round_id)
        now_home = await rounds.get_round(home, round_id)
    return now_home


async def _round_or_none(game: Game, round_id: str) -> rounds.Round | None:
    try:
        return await rounds.get_round(game, round_id)
    except UnknownRound:
        return None


async def close_round(spread: SpreadGame, round_id: str, *, operation: str | None = None) -> int:
    """Close ``round_id`` now in every partition, under one operation (:func:`codemojex.rounds.close_round`
    in each: the home partition first, then the others concurrently; each closes by its own server
    clock, so the partitions close within two round trips of each other; a scheduled close is one
    instant everywhere). The latest close time. The secret is revealed once every partition is closed;
    a partition the opening has not reached yet is left to the upkeep, which copies the round there
    closed (:func:`codemojex.spread_upkeep.copy_round`) and reveals it then. A lost reply: call again
    with the same ``operation``, which answers as the first call did and closes any partition it did not
    reach. :class:`UnknownRound` when the home has no such round, and any other error of the home's
    before anything is closed; :class:`RoundClosed` when every partition was closed already by another
    call or by its close time; another error of a partition is raised once the others were closed."""
    op = ids.mint(OPERATION) if operation is None else check_id(operation, OPERATION)
    home, others = spread.games[0], spread.games[1:]
    try:  # the home first: a partition closed means the home is (the copies and the reveal rest on it)
        first: int | BaseException = await rounds.close_round(home, round_id, operation=op, reveal=False)
    except RoundClosed as exc:
        first = exc
    rest = (rounds.close_round(game, round_id, operation=op, reveal=False) for game in others)
    results = [first, *await asyncio.gather(*rest, return_exceptions=True)]
    # a partition the opening has not reached yet is copied closed by the upkeep (its copy_round)
    missing = any(isinstance(r, UnknownRound) for r in results[1:])
    failures = [
        r
        for r in results[1:]
        if isinstance(r, BaseException) and not isinstance(r, RoundClosed | UnknownRound)
    ]
    if failures:
        raise failures[0]  # revealed nowhere: a partition may still be open
    if not missing:  # closed everywhere now: the secret may show
        for game in spread.games:
            await rounds.reveal_secret(game, round_id)
    closed = [r for r in results if isinstance(r, int)]
    if not closed:
        raise RoundClosed(f"round {round_id} is already closed")
    return max(closed)


async def reveal_closed(spread: SpreadGame, limit: int = 50) -> list[str]:
    """Reveal the secret of each of the ``limit`` latest rounds that is closed in every partition (each
    by its own clock), in every partition; the ids revealed now. A round closed in one partition and
    not yet in another shows its secret nowhere (it would be a winning guess there). The spread score
    worker's upkeep runs it each period."""
    revealed = []
    home = spread.games[0]
    now = await rounds.server_ms(home)
    latest = await rounds.list_rounds(home, limit)  # closed everywhere only if closed here first
    closed = [r.id for r in latest if r.status_at(now) is rounds.RoundStatus.CLOSED]
    shown = await rounds.read_revealed(home, closed) if closed else []
    for round_id, secret in zip(closed, shown, strict=True):
        if secret is not None:
            continue
        states = await asyncio.gather(*(closed_in(game, round_id) for game in spread.games[1:]))
        if all(states):
            for game in spread.games:
                await rounds.reveal_secret(game, round_id)
            revealed.append(round_id)
    return revealed


async def closed_in(game: Game, round_id: str) -> bool:
    """Whether ``game`` (one partition) holds ``round_id`` closed by its own server clock."""
    there = await _round_or_none(game, round_id)
    return there is not None and there.status_at(await rounds.server_ms(game)) is rounds.RoundStatus.CLOSED

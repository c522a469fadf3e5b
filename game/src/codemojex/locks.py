"""Locks: a player may lock a position that one of their scored guesses proved a hit.

The score worker records each hit it scores in the player's *proven* positions; :func:`lock` copies a
proven position into the player's locks (atomically, refusing anything unproven), and
:func:`codemojex.guesses.submit` overlays every locked position onto the guess, so the player may leave
those slots blank. A lock never changes what is proven, and it cannot be set in a closed round.
"""

from __future__ import annotations

from codemojex.engine import LENGTH
from codemojex.errors import InvalidOption, NotProven, RoundClosed, UnknownPlayer, UnknownRound
from codemojex.game import Game, translate_errors


def check_position(position: object, length: int = LENGTH) -> int:
    """Positions count from 0 here (the CLI and pages show them from 1)."""
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < length:
        raise InvalidOption(f"a position is an int in [0, {length - 1}] (0-based), got {position!r}")
    return position


def positions(row: dict[bytes, bytes]) -> dict[int, str]:
    """Position -> key, from a locks or proven hash."""
    return {int(pos): key.decode() for pos, key in sorted(row.items(), key=lambda item: int(item[0]))}


async def read_locks(game: Game, round_id: str, player_id: str) -> dict[int, str]:
    """Position -> key of the player's locks in the round."""
    key = game.keys.locks(round_id, player_id)
    with translate_errors():
        row = await game.redis.hgetall(key)
    return positions(row)


async def read_proven(game: Game, round_id: str, player_id: str) -> dict[int, str]:
    """Position -> key that the player's scored guesses proved a hit."""
    key = game.keys.proven(round_id, player_id)
    with translate_errors():
        row = await game.redis.hgetall(key)
    return positions(row)


async def lock(game: Game, round_id: str, player_id: str, position: int) -> str:
    """Lock ``position`` to its proven key (returned); :class:`NotProven` if no scored guess proved it."""
    check_position(position)
    keys = game.keys
    reply = await game.run(
        "lock",
        [
            keys.round(round_id),
            keys.proven(round_id, player_id),
            keys.locks(round_id, player_id),
            keys.player(player_id),
        ],
        [position],
    )
    code = int(reply[0])
    if code == -1:
        raise UnknownRound(f"no round {round_id}")
    if code == -4:
        raise UnknownPlayer(f"no player {player_id}")
    if code == -2:
        raise NotProven(f"position {position} (0-based) is not a proven hit of yours in round {round_id}")
    if code == -3:
        raise RoundClosed(f"round {round_id} is closed")
    return bytes(reply[1]).decode()


async def unlock(game: Game, round_id: str, player_id: str, position: int) -> bool:
    """Remove the lock on ``position``; False if there was none."""
    check_position(position)
    key = game.keys.locks(round_id, player_id)
    with translate_errors():
        if not await game.redis.exists(game.keys.player(player_id)):
            raise UnknownPlayer(f"no player {player_id}")
        return bool(await game.redis.hdel(key, str(position)))

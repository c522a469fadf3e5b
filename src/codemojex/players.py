"""Players (``PLR``): register with a display name; a new player gets the game's starting grant.

A player's id names their lane on the bus, so the queue rotates service across players.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from codemojex.errors import InvalidName, ScriptError, UnknownPlayer
from codemojex.game import Game, encode_prices, translate_errors
from codemojex.keys import PLAYER
from echomq import ids

MAX_NAME = 32  # grapheme-agnostic: code points after NFC


@dataclass(frozen=True, slots=True)
class Player:
    id: str
    name: str
    created_ms: int


def check_name(name: object) -> str:
    """A display name: NFC, stripped, 1-32 code points, no control, format or line characters
    (zero-width joiners inside emoji are allowed)."""
    if not isinstance(name, str):
        raise InvalidName(f"a name is text, got {type(name).__name__}")
    text = unicodedata.normalize("NFC", name).strip()
    if not text:
        raise InvalidName("a name is not empty")
    if len(text) > MAX_NAME:
        raise InvalidName(f"a name has at most {MAX_NAME} characters, got {len(text)}")
    for char in text:
        category = unicodedata.category(char)
        if category in {"Cc", "Zl", "Zp"} or (category == "Cf" and char != "\u200d"):
            raise InvalidName(f"a name holds no control characters, got {char!r}")
    return text


async def register(game: Game, name: str) -> Player:
    """A new player with the starting grant (every credit in their ledger)."""
    display = check_name(name)
    player_id = ids.mint(PLAYER)
    keys = game.keys
    reply = await game.run(
        "register",
        [keys.player(player_id), keys.wallet(player_id), keys.ledger(player_id), keys.players],
        [player_id, display, encode_prices(game.settings.grant)],
    )
    if int(reply[0]) != 1:
        raise ScriptError(f"register.lua answered {reply!r} for a fresh id")
    return Player(player_id, display, int(reply[1]))


async def get_player(game: Game, player_id: str) -> Player:
    """The player ``player_id``; :class:`UnknownPlayer` if there is none."""
    key = game.keys.player(player_id)
    with translate_errors():
        row: dict[bytes, bytes] = await game.redis.hgetall(key)
    if not row:
        raise UnknownPlayer(f"no player {player_id}")
    return Player(player_id, row[b"name"].decode(), int(row[b"created"]))

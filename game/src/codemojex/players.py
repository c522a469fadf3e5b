"""Players (``PLR``): register with a display name; a new player gets the game's starting grant.

A player's id names their lane on the bus, so the queue rotates service across players. A player may
hold an API token (:func:`new_token`), bound at registration in the same script: Redis keeps only the
token's SHA-256, under a key of its own that expires after the token lifetime; :mod:`codemojex.tokens`
authenticates, rotates and revokes it.

A new player is on trial: one with no admitted guess :attr:`~codemojex.game.GameSettings.trial_ms`
after joining is deleted with everything they hold (:mod:`codemojex.trials`), and their name is free
again. A name that looks like another player's (:class:`NameTaken`) comes with a free name like it
(:func:`suggest_name`: the name and a number), so a client can offer it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from codemojex.errors import InvalidOption, NameTaken, ScriptError, UnknownPlayer
from codemojex.game import Game, encode_prices, translate_errors
from codemojex.keys import PLAYER, check_digest, check_id
from codemojex.names import check_name, skeleton, variants
from echomq import ids


@dataclass(frozen=True, slots=True)
class Player:
    id: str
    name: str
    created_ms: int


TOKEN_BYTES = 32
MAX_TOKEN = 128


def new_token() -> str:
    """A fresh API token: 32 bytes from :mod:`secrets`, URL-safe text (43 characters)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_digest(token: str) -> str:
    """The SHA-256 hex digest Redis keeps for ``token`` (the token itself is never stored)."""
    return hashlib.sha256(token.encode()).hexdigest()


def register_keys(game: Game, player_id: str, digest: str | None = None) -> list[str]:
    """The keys register.lua declares for ``player_id`` and a token ``digest`` (its KEYS, in order)."""
    keys = game.keys
    return [
        keys.player(player_id),
        keys.wallet(player_id),
        keys.ledger(player_id),
        keys.players,
        keys.tokens if digest is None else keys.token(digest),
        keys.names,
        keys.trial,
    ]


def holdings_keys(game: Game, player_id: str) -> list[str]:
    """The keys that deleting ``player_id`` whole touches, in the order expire.lua and retire.lua declare
    them: record, wallet, ledger, credits, the ``players`` and ``trial`` sets, the ``names`` hash."""
    keys = game.keys
    return [
        keys.player(player_id),
        keys.wallet(player_id),
        keys.ledger(player_id),
        keys.credits(player_id),
        keys.players,
        keys.trial,
        keys.names,
    ]


def register_args(game: Game, player_id: str, display: str, digest: str = "") -> list[str | int]:
    """register.lua's ARGV for ``player_id`` named ``display`` (checked) and a token ``digest`` ('' for
    none), with the game's grant, token lifetime and trial time."""
    settings = game.settings
    return [
        player_id,
        display,
        encode_prices(settings.grant),
        digest,
        skeleton(display),
        settings.token_lifetime_ms,
        settings.trial_ms,
    ]


async def register(
    game: Game, name: str, *, token: str | None = None, player_id: str | None = None
) -> Player:
    """A new player with the starting grant (every credit in their ledger); with ``token`` (from
    :func:`new_token`), that token names them from now on. The name is checked and normalised by
    :func:`codemojex.names.check_name` (:class:`InvalidName`); a name that looks like another player's
    (the same :func:`codemojex.names.skeleton`) is :class:`NameTaken`, in the same atomic step.

    A lost reply: the player may or may not exist, and a new call registers another one. redis-py's own
    retry of the command after a timeout reuses the same id and arguments, so it grants once and
    answers the first run's player. ``player_id``, fresh, may be minted by the caller
    (:mod:`codemojex.spread` mints one of the partition the name belongs to)."""
    display = check_name(name)
    digest = "" if token is None else check_digest(token_digest(check_token(token)))
    player_id = ids.mint(PLAYER) if player_id is None else check_id(player_id, PLAYER)
    reply = await game.run(
        "register",
        register_keys(game, player_id, digest or None),
        register_args(game, player_id, display, digest),
    )
    if int(reply[0]) == -1:
        raise InvalidOption("that token names another player already: mint a new one")
    if int(reply[0]) == -2:
        suggestion = await suggest_name(game, display)
        raise NameTaken(
            f"another player is called {display!r} or a name that looks the same: pick another"
            + (f", e.g. {suggestion!r}" if suggestion else ""),
            suggestion=suggestion,
        )
    if int(reply[0]) != 1:
        raise ScriptError(f"register.lua answered {reply!r} for a fresh id")
    return Player(player_id, display, int(reply[1]))


def check_token(token: object) -> str:
    if not isinstance(token, str) or not 20 <= len(token) <= MAX_TOKEN or not token.isascii():
        raise InvalidOption(f"a token is 20-{MAX_TOKEN} ASCII characters")
    return token


async def suggest_name(game: Game, display: str) -> str | None:
    """A name like ``display`` (:func:`codemojex.names.variants`) that nobody holds now, or None. Not
    reserved: another registration may take it first (its caller then gets another suggestion)."""
    candidates = variants(display)
    with translate_errors():
        holders = await game.redis.hmget(game.keys.names, [skeleton(name) for name in candidates])
    return next((name for name, holder in zip(candidates, holders, strict=True) if holder is None), None)


async def get_player(game: Game, player_id: str) -> Player:
    """The player ``player_id``; :class:`UnknownPlayer` if there is none."""
    key = game.keys.player(player_id)
    with translate_errors():
        row: dict[bytes, bytes] = await game.redis.hgetall(key)
    if not row:
        raise UnknownPlayer(f"no player {player_id}")
    return Player(player_id, row[b"name"].decode(), int(row[b"created"]))


BACKFILL_BATCH = 500


async def backfill_names(game: Game) -> int:
    """Reserve the names of players registered before names were reserved (an upgrade): each record
    without a ``skeleton`` field claims its name's skeleton in ``names`` unless another player holds it
    (then that player keeps it, and the older one keeps its name unreserved). Returns how many it
    reserved. Safe to repeat and to run beside registrations: each claim is one ``HSETNX``, and
    register.lua reads ``names`` in its own atomic step. ``codemojex serve`` runs it at its start."""
    keys = game.keys
    reserved = 0
    start = 0
    with translate_errors():
        while batch := [
            raw.decode() for raw in await game.redis.zrange(keys.players, start, start + BACKFILL_BATCH - 1)
        ]:
            start += len(batch)
            async with game.redis.pipeline(transaction=False) as pipe:
                for player_id in batch:
                    pipe.hmget(keys.player(player_id), "name", "skeleton")
                rows = await pipe.execute()
            for player_id, (name, held) in zip(batch, rows, strict=True):
                if name is None or held is not None:
                    continue
                shape = skeleton(name.decode("utf-8", "replace"))
                if await game.redis.hsetnx(keys.names, shape, player_id):
                    await game.redis.hset(keys.player(player_id), "skeleton", shape)
                    reserved += 1
    return reserved

"""API tokens: who a bearer token names, for how long, and how a player rotates or revokes it.

* **Stored flat.** A token is minted by :func:`codemojex.players.new_token` (32 random bytes) and only
  its SHA-256 is kept, under a key of its own, ``token:<D>`` -> the player id, written with ``PX`` the
  token lifetime. Redis drops it when it ends: nothing grows with the number of tokens ever issued. The
  player's record names their current digest (field ``token``), so a player holds one live token and
  a deleted player's token goes with them (:mod:`codemojex.trials`).
* **Absolute lifetime** (:attr:`~codemojex.game.GameSettings.token_lifetime_ms`, 30 days): a token ends
  that long after it was issued, however much it is used. Chosen over a sliding lifetime because
  authentication then stays one read (no write per request, so a read-only Redis user can check a
  token), and a stolen token is bounded in time even while the thief uses it. A client that keeps
  playing rotates its token before the end (the Play page does when less than half its life is left).
* **Rotation** (:func:`rotate`, ``POST /api/me/token``) issues a new token and revokes the old one in
  one step (``token.lua``). A lost reply is safe to retry with the old token: for
  :data:`REPLAY_MS` the old digest's ``rotated:<D>`` key keeps the new token *sealed* under the old one
  (:func:`seal`: XOR with SHA-512 of the old token, which Redis never holds), and a second rotation of
  the same old token answers that same new token, as long as it is still the player's token. The old
  token is refused everywhere else from the first rotation on.
* **Revocation** (:func:`revoke`, ``DELETE /api/me/token``, the page's "Log out") deletes the token.
* **Migration.** Tokens issued before token keys sit in the ``tokens`` hash with no lifetime. They are
  read too (:func:`authenticate`), and rotating or revoking one removes it from the hash;
  :func:`migrate_legacy` (run in bounded passes beside the trial sweep) moves them to token keys with a
  full lifetime from the migration, so the hash drains to nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from codemojex import placement
from codemojex.errors import InvalidOption, ScriptError
from codemojex.game import Game, translate_errors
from codemojex.players import check_token, new_token, token_digest

REPLAY_MS = 10 * 60 * 1000  # how long a rotation's reply can be had again with the old token


@dataclass(frozen=True, slots=True)
class Issued:
    """A token just issued (or re-issued by a replayed rotation) and when it ends (server ms)."""

    player_id: str
    token: str
    expires_ms: int


def _digest(token: object) -> str | None:
    try:
        return token_digest(check_token(token))
    except InvalidOption:
        return None


def _pad(old_token: str) -> bytes:
    return hashlib.sha512(b"codemojex rotated token\0" + old_token.encode()).digest()


def seal(new: str, old_token: str) -> str:
    """``new`` sealed under ``old_token`` (hex): only a holder of the old token can :func:`unseal` it.
    A one-time pad from SHA-512 of the old token, used once (an old token is rotated once)."""
    data = new.encode()
    if len(data) > 64:
        raise InvalidOption("a sealed token is at most 64 bytes")
    return bytes(a ^ b for a, b in zip(data, _pad(old_token), strict=False)).hex()


def unseal(sealed: str, old_token: str) -> str:
    data = bytes.fromhex(sealed)
    return bytes(a ^ b for a, b in zip(data, _pad(old_token), strict=False)).decode()


async def _holder(game: Game, digest: str) -> str | None:
    """The player the digest names: its token key, else the legacy hash, else its rotation record."""
    keys = game.keys
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            pipe.get(keys.token(digest))
            pipe.hget(keys.tokens, digest)
            pipe.get(keys.rotated(digest))
            current, legacy, rotated = await pipe.execute()
    raw = current or legacy or (bytes(rotated).split(b" ", 1)[0] if rotated else None)
    return None if raw is None else bytes(raw).decode()


async def authenticate(game: Game, token: str) -> str | None:
    """The id of the player ``token`` names, or None: ill-formed, unknown, expired, rotated or revoked."""
    digest = _digest(token)
    return None if digest is None else await holder(game, digest)


async def holder(game: Game, digest: str) -> str | None:
    """The id of the player the token of SHA-256 ``digest`` names, or None (a stream ticket keeps the
    digest of the token that asked for it: :mod:`codemojex.web.events`)."""
    return (await holders(game, [digest]))[digest]


async def holders(game: Game, digests: list[str]) -> dict[str, str | None]:
    """:func:`holder` of each digest, in one pipeline (the events hub's check of its streams)."""
    keys = game.keys
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            for digest in digests:
                pipe.get(keys.token(digest))
                pipe.hget(keys.tokens, digest)
            replies = await pipe.execute()
    return {
        digest: bytes(current or legacy).decode() if (current or legacy) else None
        for digest, current, legacy in zip(digests, replies[::2], replies[1::2], strict=True)
    }


def _call(
    game: Game, op: str, player_id: str, old: str, *, new: str, sealed: str = ""
) -> tuple[list[str], list[object]]:
    keys = game.keys
    return (
        [
            keys.token(old),
            keys.rotated(old),
            keys.player(player_id),
            keys.token(new),
            keys.tokens,
            keys.sessions(player_id),
        ],
        [op, player_id, old, new, sealed, game.settings.token_lifetime_ms, REPLAY_MS],
    )


async def rotate(game: Game, token: str) -> Issued | None:
    """A new token for the player ``token`` names, the old one revoked in the same step; None if the
    token names nobody. Retried with the same old token after a lost reply (within :data:`REPLAY_MS`),
    it answers the same new token (see the module doc)."""
    old = _digest(token)
    if old is None:
        return None
    player_id = await _holder(game, old)
    if player_id is None:
        return None
    fresh = placement.mint(new_token, token_digest, game.place)  # in the player's partition
    reply = await game.run(
        "token", *_call(game, "rotate", player_id, old, new=token_digest(fresh), sealed=seal(fresh, token))
    )
    code = int(reply[0])
    if code == 1:
        return Issued(player_id, fresh, int(reply[1]))
    if code == 0:
        return Issued(player_id, unseal(bytes(reply[2]).decode(), token), int(reply[1]))
    if code == -1:
        return None
    raise ScriptError(f"token.lua answered {reply!r}")


async def revoke(game: Game, token: str) -> str | None:
    """Revoke ``token`` (log out); the player it named, or None if it named nobody."""
    digest = _digest(token)
    if digest is None:
        return None
    player_id = await _holder(game, digest)
    if player_id is None:
        return None
    reply = await game.run("token", *_call(game, "revoke", player_id, digest, new=digest))
    return player_id if int(reply[0]) == 1 else None


async def migrate_legacy(game: Game, limit: int = 100) -> int:
    """Move up to ``limit`` tokens of the legacy ``tokens`` hash to token keys (a full lifetime from
    now; a token whose player is gone is dropped); the number moved or dropped. Each move is one step
    of ``token.lua`` (``adopt``), so a rotation or a revocation racing it is never undone."""
    keys = game.keys
    with translate_errors():
        _, page = await game.redis.hscan(keys.tokens, 0, count=limit)
    moved = 0
    for raw_digest, raw_player in list(page.items())[:limit]:
        digest, player_id = bytes(raw_digest).decode(), bytes(raw_player).decode()
        reply = await game.run("token", *_call(game, "adopt", player_id, digest, new=digest))
        moved += int(reply[0]) > 0
    return moved

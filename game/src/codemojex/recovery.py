"""Recovery codes: how a player signs in again on another device (or after clearing the browser).

* **The code.** :func:`new_code`: 20 characters of Crockford's base32 (100 bits from :mod:`secrets`),
  shown in four groups of five (``7KQ2M-...``). Typing is forgiving: case, spaces and dashes do not
  matter, and ``O``/``I``/``L`` read as ``0``/``1``/``1`` (:func:`normalise`). 100 bits make guessing
  hopeless at any rate (the host also rate-limits the sign-in per address, SECURITY.md), so, as for
  tokens, a plain SHA-256 is stored, never the code: ``recovery:<D>`` -> the player id, and the
  player's record names the current digest (field ``recovery``). The key has no TTL: a code lasts as
  long as the player (a player deleted whole, :mod:`codemojex.trials`, takes it along).
* **Shown once.** :func:`issue` makes a new code and revokes the old one in the same step
  (``recovery.lua``). It is shown once (at sign-up, or when the player asks for a new one); a lost
  code is replaced by asking again with the token, never read back. Concurrent issues for one player
  (two tabs, or a client on purpose) each answer a code, and the last one alone stays in force.
* **Sign in** (:func:`sign_in`): a code (and, optionally, the name, which must then be the player's)
  is traded for a new token of the full lifetime. The player's other tokens stay valid unless the
  caller asks to sign out everywhere else. The lookup is by the code's digest (a key), so no secret is
  compared byte by byte, and a wrong code, a wrong name and an unknown player are one answer (None).
  Tokens issued this way are the player's *sessions* (``sessions:<PLR>``, at most
  :data:`MAX_SESSIONS` live; the oldest is revoked past that), rotated and revoked like any token.
* **Lost replies.** A sign-in whose reply is lost leaves a token nobody holds (only its digest is
  stored): the client signs in again and gets another; the orphan ends with its lifetime, or earlier
  as the oldest session past :data:`MAX_SESSIONS`, or at a sign-out everywhere else. An issue whose
  reply is lost leaves the new code in force (the old one revoked) and unknown: the client asks for
  another. redis-py's own retry of either call (same arguments) answers the first call's result.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from codemojex import placement
from codemojex.errors import InvalidOption, ScriptError, UnknownPlayer
from codemojex.game import Game, translate_errors
from codemojex.names import skeleton
from codemojex.players import new_token, token_digest

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford's base32: no I, L, O, U
LENGTH = 20  # characters: 100 bits
GROUP = 5
MAX_SESSIONS = 10  # live tokens traded for a code, per player
_READS = str.maketrans({"O": "0", "I": "1", "L": "1"})


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A token just traded for a recovery code, and when it ends (server ms)."""

    player_id: str
    token: str
    expires_ms: int


def new_code() -> str:
    """A fresh recovery code: 20 Crockford base32 characters (100 bits), in groups of five."""
    raw = "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))
    return "-".join(raw[i : i + GROUP] for i in range(0, LENGTH, GROUP))


def normalise(code: object) -> str:
    """The 20 characters of a typed code (case, spaces and dashes dropped; O, I, L read as 0, 1, 1);
    :class:`InvalidOption` if it cannot be a code."""
    if not isinstance(code, str) or len(code) > 64:
        raise InvalidOption(f"a recovery code is {LENGTH} letters and digits")
    text = "".join(code.split()).replace("-", "").upper().translate(_READS)
    if len(text) != LENGTH or any(char not in ALPHABET for char in text):
        raise InvalidOption(f"a recovery code is {LENGTH} letters and digits (dashes and spaces optional)")
    return text


def code_digest(code: str) -> str:
    """The SHA-256 hex Redis keeps for a code (normalised first)."""
    return hashlib.sha256(normalise(code).encode()).hexdigest()


async def issue(game: Game, player_id: str) -> str:
    """A new recovery code for ``player_id`` (shown once), the old one revoked in the same step;
    :class:`~codemojex.errors.UnknownPlayer` if there is no such player."""
    keys = game.keys
    code = placement.mint(new_code, code_digest, game.place)  # in the player's partition
    digest = code_digest(code)
    with translate_errors():  # the current code's key, declared (a concurrent issue: the script's own)
        raw = await game.redis.hget(keys.player(player_id), "recovery")
    old = "" if raw is None else bytes(raw).decode()
    reply = await game.run(
        "recovery",
        [
            keys.player(player_id),
            keys.recovery(digest),
            keys.recovery(old) if old else keys.recovery(digest),
            keys.recovery(digest),
            keys.sessions(player_id),
        ],
        ["issue", player_id, digest, old, "", "0", 0, MAX_SESSIONS],
    )
    answer = int(reply[0])
    if answer == 1:
        return code
    if answer == -1:
        raise UnknownPlayer(f"no player {player_id}")
    raise ScriptError(f"recovery.lua answered {reply!r}")


async def has_code(game: Game, player_id: str) -> bool:
    """Whether the player has a recovery code (never what it is: only its digest is kept)."""
    with translate_errors():
        return bool(await game.redis.hexists(game.keys.player(player_id), "recovery"))


async def sign_in(
    game: Game, code: str, *, name: str | None = None, everywhere_else: bool = False
) -> SignedIn | None:
    """A new token for the player ``code`` names (and whose name is ``name``, if given); None if the
    code (or the name) names nobody. ``everywhere_else``: revoke the player's other tokens in the same
    step. :class:`InvalidOption` for text that cannot be a code."""
    digest = code_digest(code)
    shape = ""
    if name is not None:
        try:
            shape = skeleton(name)
        except ValueError:
            return None
    keys = game.keys
    with translate_errors():
        raw = await game.redis.get(keys.recovery(digest))
    if raw is None:
        return None
    player_id = bytes(raw).decode()
    token = placement.mint(new_token, token_digest, game.place)
    reply = await game.run(
        "recovery",
        [
            keys.player(player_id),
            keys.recovery(digest),
            keys.recovery(digest),
            keys.token(token_digest(token)),
            keys.sessions(player_id),
        ],
        [
            "signin",
            player_id,
            token_digest(token),
            digest,
            shape,
            "1" if everywhere_else else "0",
            game.settings.token_lifetime_ms,
            MAX_SESSIONS,
        ],
    )
    if int(reply[0]) == 1:
        return SignedIn(player_id, token, int(reply[1]))
    if int(reply[0]) == -1:
        return None
    raise ScriptError(f"recovery.lua answered {reply!r}")

"""Rate limits: token buckets in Redis, per client address and per player, run by ``admit.lua``.

Each request class has its own pair of buckets (:class:`Rate`: a burst ``capacity`` refilled one token
every ``period_ms``): ``signup`` (``POST /api/players``, per address only: a new player is currency),
``recover`` (``POST /api/recover``, per address only: it mints a token), ``guess``
(``POST /api/rounds/<RND>/guesses``) and ``read`` (every other API call). The player's bucket
is keyed by the player id: the script itself reads the id the bearer token's key names (no round trip is
added, and a rotation keeps the bucket it had); a token with no token key (a legacy token of the
``tokens`` hash until it is migrated, or an unknown token, throttled by the address's bucket anyway) is
charged a bucket keyed by its SHA-256. The address's is keyed by the SHA-256 of the address. The script takes
a token from both buckets or from neither, on the Redis server's clock, and every bucket key expires when
it would be full again (see ``lua/admit.lua``).

A refusal is :class:`Refused` (the host answers 429 ``rate_limited`` with ``Retry-After``). When the
limiter itself fails (Redis unreachable, the script refused), :func:`take` raises the game's error and
:mod:`codemojex.web.admission` decides: reads fail open, sign-ups and guesses fail closed (503).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from codemojex.game import Game

SIGNUP, GUESS, READ, RECOVER = "signup", "guess", "read", "recover"


@dataclass(frozen=True, slots=True)
class Rate:
    """A bucket of ``capacity`` tokens (the burst) refilled one token every ``period_ms``."""

    capacity: int
    period_ms: int

    def __post_init__(self) -> None:
        if self.capacity < 1 or self.period_ms < 1:
            raise ValueError(f"a rate has capacity >= 1 and period_ms >= 1, got {self}")

    @property
    def per_second(self) -> float:
        return 1000 / self.period_ms


@dataclass(frozen=True, slots=True)
class Refused:
    """Over a limit: which bucket (``address`` / ``player``) and when to try again."""

    scope: str
    retry_after_s: int


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


async def take(
    game: Game,
    kind: str,
    address: str,
    per_address: Rate | None,
    *,
    token: str | None = None,
    per_player: Rate | None = None,
) -> Refused | None:
    """Take one token of class ``kind`` from the address's bucket (none with ``per_address`` None) and
    (with ``token``) the player's; None when admitted. Raises :class:`~codemojex.errors.CodemojexError`
    when the limiter fails."""
    address_key = game.keys.bucket(kind, "a", digest(address))
    use_player = token is not None and per_player is not None
    token_digest = digest(token if use_player and token else "")
    player_key = game.keys.bucket(kind, "p", token_digest)
    player_rate = per_player if use_player and per_player is not None else Rate(1, 1)
    reply = await game.run(
        "admit",
        [address_key, player_key, game.keys.token(token_digest)],
        [
            0 if per_address is None else per_address.capacity,
            1 if per_address is None else per_address.period_ms,
            player_rate.capacity if use_player else 0,
            player_rate.period_ms,
            game.keys.player_buckets(kind),
        ],
    )
    if int(reply[0]) == 1:
        return None
    retry_ms = int(reply[1])
    return Refused("address" if int(reply[2]) == 1 else "player", max(1, -(-retry_ms // 1000)))

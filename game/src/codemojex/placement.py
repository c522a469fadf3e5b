"""Where a spread game (:mod:`codemojex.spread`) keeps what a secret names: the partition of a player
token, a stream ticket's token or a recovery code is CRC-32 of its SHA-256 digest modulo P.

So the host finds a caller's partition from the bearer token (or the recovery code) alone, with no
extra round trip, and ``post_guess.lua`` (token, rate buckets, round, locks and admission in one script)
and ``recovery.lua`` run in the player's partition unchanged. Every such secret is minted server-side
(:func:`mint`: drawn again until its digest lands in the player's partition, about P draws, all local),
so a token always names a player of the partition it hashes to. On one game (P = 1) every secret is
in partition 0 and :func:`mint` draws once.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

MINT_TRIES = 100_000  # draws to land one secret in a partition: about P are needed, P <= 1024

Place = tuple[int, int]
"""(partition, P): where a game's keys are in its spread game; ``(0, 1)`` for one game."""

HOME: Place = (0, 1)


def partition_of_digest(digest: str, partitions: int) -> int:
    """The partition of the secret whose SHA-256 hex digest is ``digest``."""
    return zlib.crc32(digest.encode()) % partitions


def mint(new: Callable[[], str], digest: Callable[[str], str], place: Place) -> str:
    """A fresh secret of ``new`` whose ``digest`` lands in ``place``'s partition."""
    partition, partitions = place
    for _ in range(MINT_TRIES):
        secret = new()
        if partitions == 1 or partition_of_digest(digest(secret), partitions) == partition:
            return secret
    raise AssertionError(f"no secret of partition {partition} of {partitions} in {MINT_TRIES} tries")

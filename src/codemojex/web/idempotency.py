"""The ``Idempotency-Key`` header: a client's retry of one guess is the same job, charged once.

The first request with a key mints a JOB id and stores ``<JOB> <digest>`` under the player and the key's
SHA-256 (``SET NX``, kept :data:`KEPT_MS`); the digest is of the request *as sent* (round, guess, locks), so
a retry is recognised even if the player's locks changed meanwhile. A later request with the same key and
the same digest gets the same JOB id, which :func:`codemojex.guesses.submit` answers as a duplicate (nothing
charged; submit too judges a job on its guess as sent, before the locks are overlaid); a different request
under the same key is 409 ``idempotency_conflict``. Concurrent requests with one key race on ``SET NX``:
one stores its JOB id, the others read it.

What a refusal does with the key depends on whether the same request could be admitted a moment later.
A refusal of the request itself (a guess that does not parse without the locks, an ill-formed input, an
unknown round) would refuse every copy of it, so the key is forgotten and the refusal leaves no trace. A
refusal of the moment (no funds, a round not open yet or closed, the queue full, the guess limit, a
solve) is not: a concurrent copy of the request, or its retry after a top-up, may be admitted under the
same JOB id. Forgetting the key then would let a later retry mint a second JOB and pay twice, so the key
is kept: every copy and retry of the request names the one JOB, admitted and charged at most once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from codemojex.game import Game, translate_errors
from codemojex.guesses import Refusal
from codemojex.keys import JOB
from codemojex.web.problems import Problem
from echomq import ids

KEPT_MS = 24 * 3600 * 1000  # as the bus's dedup window: a retry after a day is a new guess
MAX_KEY = 128


def check_key(key: str) -> str:
    """1-128 printable ASCII characters, else 400 ``invalid_input``."""
    if not 1 <= len(key) <= MAX_KEY or not all(" " <= char <= "~" for char in key):
        raise Problem(400, "invalid_input", f"an Idempotency-Key is 1-{MAX_KEY} printable ASCII characters")
    return key


def request_digest(round_id: str, request: dict[str, Any]) -> str:
    canonical = json.dumps([round_id, request], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate too


async def job_for_key(game: Game, player_id: str, key: str, digest: str) -> tuple[str, bool]:
    """The JOB id that ``key`` names for this player's request ``digest`` (minted the first time), and
    whether this call stored it."""
    key_digest = hashlib.sha256(check_key(key).encode()).hexdigest()
    redis_key = game.keys.idempotency(player_id, key_digest)
    fresh = ids.mint(JOB)
    with translate_errors():
        for _ in range(3):  # a stored key can expire between the SET NX and the GET: try again
            if await game.redis.set(redis_key, f"{fresh} {digest}".encode(), nx=True, px=KEPT_MS):
                return fresh, True
            stored = await game.redis.get(redis_key)
            if stored is not None:
                break
        else:  # pragma: no cover  (three expiries in a row)
            raise Problem(503, "unavailable", "the Idempotency-Key could not be stored; retry")
    job, _, stored_digest = bytes(stored).decode().partition(" ")
    if stored_digest != digest:
        raise Problem(
            409, "idempotency_conflict", "this Idempotency-Key was used for another request; use a new key"
        )
    return job, False


def forgettable(refusal: Refusal, guess: object) -> bool:
    """Whether a refused request's key may be dropped: only when every copy of the request is refused
    too, i.e. a guess that does not parse and has no blank a lock could fill (see the module doc)."""
    if refusal is not Refusal.BAD_GUESS:
        return False
    if isinstance(guess, str):
        return "_" not in guess
    return isinstance(guess, list) and all(slot not in (None, "", "_") for slot in guess)


async def forget_key(game: Game, player_id: str, key: str) -> None:
    """Drop the key this request stored, when its guess was refused: a refusal changes nothing, and a
    retry with the same key is judged afresh."""
    key_digest = hashlib.sha256(check_key(key).encode()).hexdigest()
    with translate_errors():
        await game.redis.delete(game.keys.idempotency(player_id, key_digest))

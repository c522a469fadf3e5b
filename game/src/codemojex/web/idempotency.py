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
same JOB id, so the key must name that JOB for as long as any copy may still be admitted.

**Memory rule** (``lua/idempotency.lua``). The key is a hash that counts the requests *in flight* under
it: each request claims the key (stores or reads the JOB, counts itself in, and keeps the key the full
:data:`KEPT_MS`) before it submits, and releases it after the answer, saying whether its JOB was
admitted (or answered a duplicate). Only when the last request in flight releases and no request under
the key was ever admitted is its life cut to :data:`REFUSED_MS`: a retry within that time (after a
top-up) still names the one JOB; after it, a retry mints a new JOB, and that pays at most once, because
no copy of the old JOB is left to be admitted (each copy claims before it submits, in one script, and the
cut needs none in flight). A guess admitted keeps its key the full window from its admission. A request
whose outcome is unknown (Redis unavailable during the submit) or that dies midway never releases: its
key keeps the full window, the safe side. So a player refused for want of funds, one fresh key per
request, leaves keys for :data:`REFUSED_MS` only: memory bounded by the guess rate times ten minutes
(``tests/web/test_api_refused_guess_memory.py``). Keys in the old form (a ``<JOB> <digest>`` string) are
read as before and expire on their own.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from codemojex.errors import CodemojexError
from codemojex.game import Game, translate_errors
from codemojex.guesses import Refusal, Submission
from codemojex.keys import JOB
from codemojex.web.problems import Problem
from echomq import ids

KEPT_MS = 24 * 3600 * 1000  # as the bus's dedup window: a retry after a day is a new guess
REFUSED_MS = 10 * 60 * 1000  # a key no guess was admitted under, once no copy is in flight
MAX_KEY = 128

log = logging.getLogger("codemojex.web.idempotency")


def check_key(key: str) -> str:
    """1-128 printable ASCII characters, else 400 ``invalid_input``."""
    if not 1 <= len(key) <= MAX_KEY or not all(" " <= char <= "~" for char in key):
        raise Problem(400, "invalid_input", f"an Idempotency-Key is 1-{MAX_KEY} printable ASCII characters")
    return key


def request_digest(round_id: str, request: dict[str, Any]) -> str:
    canonical = json.dumps([round_id, request], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate too


def _redis_key(game: Game, player_id: str, key: str) -> str:
    return game.keys.idempotency(player_id, hashlib.sha256(check_key(key).encode()).hexdigest())


async def job_for_key(game: Game, player_id: str, key: str, digest: str) -> tuple[str, bool]:
    """Claim ``key`` for this player's request ``digest``: the JOB id it names (minted the first time)
    and whether this call stored it. The caller must :func:`release` it once the submit has answered."""
    reply = await game.run(
        "idempotency",
        [_redis_key(game, player_id, key)],
        ["claim", ids.mint(JOB), digest, KEPT_MS, REFUSED_MS],
    )
    stored, job, stored_digest = int(reply[0]), bytes(reply[1]).decode(), bytes(reply[2]).decode()
    if stored_digest != digest:
        raise Problem(
            409, "idempotency_conflict", "this Idempotency-Key was used for another request; use a new key"
        )
    return job, stored == 1


async def release(game: Game, player_id: str, key: str, job: str, *, admitted: bool) -> None:
    """Count this request out of ``key``'s claims; with none left in flight and no guess ever admitted
    under it, the key is kept :data:`REFUSED_MS` only (see the module doc). A failure is logged, not
    raised: the request's answer stands, and the unreleased key keeps the full window (the safe side)."""
    try:
        await game.run(
            "idempotency",
            [_redis_key(game, player_id, key)],
            ["release", job, "1" if admitted else "0", KEPT_MS, REFUSED_MS],
        )
    except CodemojexError as exc:
        log.warning("idempotency key of %s not released (%s): it keeps the full window", job, exc)


def forgettable(refusal: Refusal, guess: object) -> bool:
    """Whether a refused request's key may be dropped: only when every copy of the request is refused
    too, i.e. a guess that does not parse and has no blank a lock could fill (see the module doc)."""
    if refusal is not Refusal.BAD_GUESS:
        return False
    if isinstance(guess, str):
        return "_" not in guess
    return isinstance(guess, list) and all(slot not in (None, "", "_") for slot in guess)


async def settle(
    game: Game,
    player_id: str,
    key: str,
    job: str,
    submission: Submission | None,
    *,
    stored: bool,
    guess: object = None,
    definite: bool = False,
) -> None:
    """After the submit of a keyed request: forget the key this request stored when the refusal is
    definite (``definite``, or :func:`forgettable`), else :func:`release` its claim."""
    refusal = submission.refusal if submission is not None else None
    if stored and (definite or (refusal is not None and forgettable(refusal, guess))):
        await forget_key(game, player_id, key)
    else:
        await release(game, player_id, key, job, admitted=submission is not None and refusal is None)


async def forget_key(game: Game, player_id: str, key: str) -> None:
    """Drop the key this request stored, when its guess was refused: a refusal changes nothing, and a
    retry with the same key is judged afresh."""
    with translate_errors():
        await game.redis.delete(_redis_key(game, player_id, key))

"""Players who never played expire: the starting grant is not a free store of value.

A new player is *on trial* (the ``trial`` zset, scored by the time the trial ends, written by
``register.lua`` with the registering host's :attr:`~codemojex.game.GameSettings.trial_ms`, so the end
a player was told is the one applied) until their first admitted guess: ``submit.lua`` takes them off
in the same atomic step as the admission, and from then on they are kept. A player still on trial
:attr:`~codemojex.game.GameSettings.trial_ms` (24 h) after joining is deleted with everything they
hold, in one step (``expire.lua``): record, wallet, ledger, credits (an operator's credit does not keep
a player: only playing does), token key, name reservation (the name is free again) and their
``players`` entry. Other traces need no sweep: their idempotency keys expire on their own (24 h), and a
player with no admitted guess has no guess, quota, lock or board entry.

**A sweep, not TTLs.** The ``players`` zset and the ``names`` hash are shared structures whose members
cannot expire by themselves, and a TTL on each of a player's keys would let them lapse one at a time (a
wallet gone before its record; a name held by a player who is gone). So one script deletes the whole
player, and a periodic pass (:func:`expire_players`) finds the due ones by index (``ZRANGEBYSCORE``),
at most :data:`BATCH` per pass. The score worker runs it (:class:`Expirer`, beside the refunder, every
:data:`PASS_EVERY_S`), repeating a full pass at once until the backlog is gone, so a sign-up flood is
cleared at the sweep's pace and memory returns to what the players who played hold.

**Race-free.** ``expire.lua`` and ``submit.lua`` are both atomic scripts on the game's one slot, so a
guess admitted at the same moment as the expiry is ordered against it: admitted first, the player is
off trial and the expiry changes nothing; expired first, the player is gone and the guess is refused
``unknown_player`` with nothing charged. Never half a player, never a charged guess of a deleted one.

Players registered before the trial set existed are not on it and are kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from codemojex import tokens
from codemojex.errors import CodemojexError, ScriptError
from codemojex.game import Game, translate_errors
from codemojex.names import skeleton
from codemojex.players import holdings_keys

log = logging.getLogger("codemojex.trials")

BATCH = 200  # players looked at per pass, at most
PASS_EVERY_S = 30.0
FULL_PASSES = 10  # passes run back to back while each finds a full batch due


@dataclass(frozen=True, slots=True)
class ExpiryPass:
    checked: int  # players due that the pass looked at
    expired: tuple[str, ...]  # the players it deleted


def expire_call(
    game: Game, player_id: str, digest: str, name_skeleton: str, code: str = ""
) -> tuple[list[str], list[object]]:
    """Keys and args of one expire.lua call (``code``: the recovery code's digest the record names)."""
    keys = game.keys
    return (
        [
            *holdings_keys(game, player_id),
            keys.token(digest) if digest else keys.player(player_id),
            keys.sessions(player_id),
            keys.recovery(code) if code else keys.player(player_id),
        ],
        [player_id, digest, name_skeleton, code],
    )


async def expire_players(game: Game, limit: int = BATCH) -> ExpiryPass:
    """Delete up to ``limit`` players whose trial is over (see the module doc)."""
    keys = game.keys
    with translate_errors():
        seconds, micros = await game.redis.time()
        cutoff = int(seconds) * 1000 + int(micros) // 1000
        due = await game.redis.zrangebyscore(keys.trial, "-inf", cutoff, start=0, num=limit)
    expired: list[str] = []
    for raw in due:
        player_id = bytes(raw).decode()
        with translate_errors():
            digest, stored, name, code = await game.redis.hmget(
                keys.player(player_id), "token", "skeleton", "name", "recovery"
            )
        if stored is not None:
            held = bytes(stored).decode()
        else:  # a record without its skeleton (or gone): the name's skeleton as computed today
            held = "" if name is None else skeleton(bytes(name).decode())
        token = "" if digest is None else bytes(digest).decode()
        recovery = "" if code is None else bytes(code).decode()
        reply = await game.run("expire", *expire_call(game, player_id, token, held, recovery))
        code = int(reply[0])
        if code == 1:
            expired.append(player_id)
        elif code not in (0, -1, -2):
            raise ScriptError(f"expire.lua answered {reply!r}")
    return ExpiryPass(len(due), tuple(expired))


async def trial_ends(game: Game, player_id: str) -> int | None:
    """When the player is deleted unless an admitted guess comes first (server ms), or None: kept."""
    with translate_errors():
        ends = await game.redis.zscore(game.keys.trial, player_id)
    return None if ends is None else int(ends)


class Expirer:
    """The score worker's account upkeep: :meth:`run` expires players whose trial is over and moves
    legacy tokens to token keys (:func:`codemojex.tokens.migrate_legacy`), every ``every_s``."""

    def __init__(self, game: Game, every_s: float = PASS_EVERY_S) -> None:
        self.game = game
        self.every_s = every_s

    async def run_pass(self) -> int:
        """Passes back to back while each finds a full batch (at most :data:`FULL_PASSES`); the number
        of players expired."""
        expired = 0
        for _ in range(FULL_PASSES):
            done = await expire_players(self.game)
            expired += len(done.expired)
            if done.checked < BATCH:
                break
        await tokens.migrate_legacy(self.game, BATCH)
        return expired

    async def run(self, stopping: asyncio.Event) -> None:
        """A pass now and every ``every_s`` until ``stopping`` is set; an error is logged, the next pass
        tries again."""
        while not stopping.is_set():
            try:
                expired = await self.run_pass()
                if expired:
                    log.info("expired %d players who never played", expired)
            except CodemojexError as exc:
                log.warning("expiry pass failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.every_s)

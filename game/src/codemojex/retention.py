"""The retention of closed rounds' per-guess data: Redis memory does not grow with the rounds played.

A concluded round (:mod:`codemojex.history`: its summary is kept for good) keeps its per-guess data for
the retention (:attr:`codemojex.schedule.RoundSettings.retention_s`, 7 days unless ``serve
--retention`` says otherwise): the players' guesses on the history page, the board, the event stream.
Then :func:`purge`, run by the score worker's upkeep pass (:mod:`codemojex.upkeep`; its Redis user may
delete the secret, the web host's may not), deletes it, oldest close first, at most ``limit`` rounds a
pass, in bounded steps of ``batch`` keys or members:

0. the round's secret (``cmxs:``): a user that may not touch it is refused before any change; then
   the round's hash, so a guess of the round scored from now on is refused by ``score.lua`` (no
   round: dead-lettered, never scored onto a half-purged round, see below);
1. its guess records (``guess:<GES>``, listed by ``scored:<RND>``, which shrinks as they go);
2. per player of its quota (``quota:<RND>``, which shrinks as they go): ``submitted``, ``played``,
   ``proven`` and ``locks``;
3. in one transaction: ``charges``, ``refunds``, ``standing``, ``board``, ``events``, ``revealed``,
   ``quota``, and its ``rounds`` and ``retained`` entries, so a pass cut short is
   taken up by the next one (the round stays in ``retained`` until this last step).

What stays of a purged round is its summary and its ``history`` entry: the history page then shows the
secret, the final top of the board and the counts, and says the guesses are no longer kept. Players'
wallets and ledgers are not per-round data and are never touched (a ledger entry names its JOB).

Only concluded rounds are purged, and only by the retention after their close, which is far longer than
a guess job can stay pending (its attempts, leases and backoff). And only once none of its guesses is
still queued (:func:`codemojex.history.pending_guesses`: a round concluded at the end of its grace with
a backlog, and a retention shorter than that backlog), for at most :data:`PENDING_WAIT_MS` past the
retention: such a guess is scored and paid, not dead-lettered with its charge gone. A job of a purged
round delivered after all (a dead guess retried late) is dead-lettered, by
``read_rules`` or, when a worker still holds the round's rules, by ``score.lua``, which refuses a round
without its hash: it is never scored, so it pays no second solve reward (the round's ``rewards`` marker
is gone), is never scored for free after a refund (``refunds`` is gone) and recreates no key of the
round. Its charge is not refunded either (``charges`` is gone with the round): such a guess was
admitted before a close at least the retention ago. Safe beside another worker: deleting twice is
harmless.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from codemojex import history, rounds
from codemojex.game import Game, translate_errors

BATCH = 200  # keys or members per step
ROUNDS_PER_PASS = 20
PENDING_WAIT_MS = 24 * 3600 * 1000  # past the retention, how long a round's queued guesses are waited for


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


async def purge(
    game: Game,
    *,
    retention_s: float,
    limit: int = ROUNDS_PER_PASS,
    batch: int = BATCH,
    only: Callable[[str], Awaitable[bool]] | None = None,
) -> list[str]:
    """Purge the per-guess data of the concluded rounds closed ``retention_s`` ago or more (at most
    ``limit``, oldest first) whose guesses are all settled (see the module doc), and for which ``only``
    answers True when given (a spread game's: its whole summary written); the round ids purged."""
    now = await rounds.server_ms(game)
    cutoff = now - int(retention_s * 1000)
    with translate_errors():
        due = await game.redis.zrangebyscore(
            game.keys.retained, "-inf", cutoff, start=0, num=2 * limit, withscores=True
        )
    purged: list[str] = []
    for raw, closed_ms in due:
        round_id = _text(raw)
        if closed_ms > cutoff - PENDING_WAIT_MS and await history.pending_guesses(game, round_id) > 0:
            continue  # a guess admitted before the close is still queued: purged once it is settled
        if only is not None and not await only(round_id):
            continue
        await purge_round(game, round_id, batch=batch)
        purged.append(round_id)
        if len(purged) == limit:
            break
    return purged


async def purge_round(
    game: Game,
    round_id: str,
    *,
    batch: int = BATCH,
    on_player: Callable[[str], Awaitable[None]] | None = None,
    forget_summary: bool = False,
) -> None:
    """Delete the per-guess data of ``round_id`` (see the module doc); its summary stays unless
    ``forget_summary`` (the proof's demo rounds, :mod:`codemojex.proof_retention`, keep no history).
    ``on_player`` is called for each player of the round once their round keys are gone (the demo
    retires its idle players there)."""
    keys, redis = game.keys, game.redis
    with translate_errors():
        await redis.unlink(keys.secret(round_id))  # first: refused before any change for the host's user
        await redis.unlink(keys.round(round_id))  # then: score.lua scores nothing of the round from here
        while guess_ids := await redis.zrange(keys.scored(round_id), 0, batch - 1):
            await redis.unlink(*(keys.guess(_text(raw)) for raw in guess_ids))
            await redis.zrem(keys.scored(round_id), *guess_ids)
        cursor = 0
        while True:  # a page may be empty before the end: the cursor says when it is (0)
            cursor, counts = await redis.hscan(keys.quota(round_id), cursor, count=batch)
            players = [_text(raw) for raw in counts]
            for player_id in players:
                await redis.unlink(
                    keys.submitted(round_id, player_id),
                    keys.played(round_id, player_id),
                    keys.proven(round_id, player_id),
                    keys.locks(round_id, player_id),
                )
                if on_player is not None:
                    await on_player(player_id)
            if players:  # deleted as it goes: a field there all along is still returned (HSCAN)
                await redis.hdel(keys.quota(round_id), *players)
            if int(cursor) == 0:
                break
        async with redis.pipeline(transaction=True) as pipe:
            pipe.unlink(
                keys.charges(round_id),
                keys.refunds(round_id),
                keys.allowances(round_id),
                keys.rewards(round_id),
                keys.standing(round_id),
                keys.board(round_id),
                keys.events(round_id),
                keys.revealed(round_id),
                keys.quota(round_id),
            )
            pipe.zrem(keys.rounds, round_id)
            if forget_summary:
                pipe.hdel(keys.summaries, round_id)
                pipe.zrem(keys.history, round_id)
            pipe.zrem(keys.retained, round_id)
            pipe.zrem(keys.live, round_id)
            await pipe.execute()

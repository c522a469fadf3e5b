"""Refunds: a guess that can never be scored gives the player their payment back, once.

The rule
========
* A guess job that is **dead** (dead-lettered: a payload the worker cannot read, no such round, or its
  last try failed or its lease expired) and has **no GES record** is refunded exactly the currency and
  amount it was charged at submit, **once**, with a ledger entry of reason ``refund`` naming the JOB.
  The refund returns the payment only: the guess still counts against the round's guess limit.
* ``refund.lua`` decides and credits in one atomic step, fenced on the queue's row state: it refunds only
  while the row is ``dead``, so it cannot interleave with ``retry_dead`` (which takes the row out of
  ``dead`` in one step of its own), and a per-JOB marker in ``refunds:<RND>`` makes every later call
  answer :attr:`Refund.ALREADY`. Any number of runners may race; one refunds.
* A refunded job that an operator retries and that is then scored **pays again** before it is scored
  (``score.lua``: ledger reason ``recharge``, the same currency and amount, the JOB named) when the
  wallet can pay; when it cannot, the job completes without a record (result ``unpaid``). So a guess is
  never both refunded and scored for free: its net charge is its price when it is scored, 0 otherwise.
* A job that is dead **and** has a GES record was scored, but its completion was lost (the score's effect
  was written and the worker died before the completion, on its last try, so the sweep dead-lettered
  it). It is never refunded: ``refund.lua`` finishes it instead, in the same atomic step (dead -> done,
  result ``scored``) and answers :attr:`Refund.SCORED`; so a scored guess is never left dead. Lost reply
  or retry: the next call finds it done (:attr:`Refund.NOT_DEAD`), nothing changes again.
* The wallet never goes negative (a refund only credits; a recharge only debits what the wallet holds),
  and every entry names its JOB, so :func:`codemojex.wallet.reconcile` holds throughout.

Who runs it: the score worker, for each job its own fail dead-lettered (echomq's ``on_dead`` hook), and
every :data:`PASS_EVERY_S` over the dead set (:func:`refund_dead`), which catches the jobs the sweep
dead-lettered (a lease that expired on the last try) and any a dying worker left; and the operator
(``codemojex refund``). A lost reply of any of these: call again; a refund that landed answers ALREADY.
The charge is found through the round the payload names or, when the payload names none or a round
that did not charge it (the host never writes such a payload), the round the charge's ledger entry
names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from codemojex.errors import CodemojexError, ScriptError
from codemojex.game import Game, check_int, translate_errors
from codemojex.keys import JOB, PLAYER, ROUND, check_id, guess_of
from echomq import Job
from echomq import rows as bus_rows

log = logging.getLogger("codemojex.refunds")

PASS_EVERY_S = 10.0  # the score worker's pass over the dead set (as the bus's sweep period)
PASS_LIMIT = 1000  # dead ids read per page of a pass
# A pass looks back this far before its checkpoint: a dead-letter stamped a little earlier than the last
# one seen (the same millisecond, a server clock stepped back) is still found; rechecks are harmless.
LOOK_BACK_MS = 60_000


class Refund(StrEnum):
    """What :func:`refund` did for one job."""

    REFUNDED = "refunded"  # credited back now
    ALREADY = "already"  # refunded before (and maybe recharged or completed unpaid since)
    NOT_DEAD = "not_dead"  # queued, active, done, or no row: nothing to refund
    SCORED = "scored"  # it has a GES record: never refunded (a dead one is finished: dead -> done)
    UNCHARGED = "uncharged"  # submit did not charge it (a plain bus job, or a payload naming no round)


@dataclass(frozen=True, slots=True)
class RefundResult:
    job: str
    outcome: Refund
    charge: tuple[str, int] | None = None  # the currency and amount credited (REFUNDED only)


@dataclass(frozen=True, slots=True)
class RefundPass:
    """What one :func:`refund_dead` pass did."""

    checked: int  # dead ids looked at
    refunded: tuple[str, ...]  # the JOB ids refunded by this pass
    checkpoint_ms: int  # the dead-set time the next pass starts from (less LOOK_BACK_MS)


def _round_of(payload: bytes | None) -> str | None:
    """The round a guess payload names, read leniently (a payload the worker refuses may still name it)."""
    try:
        data = json.loads(payload or b"")
        return check_id(data["round"], ROUND)
    except (ValueError, TypeError, KeyError, CodemojexError):
        return None


_CODES = {1: Refund.REFUNDED, 0: Refund.ALREADY, -1: Refund.NOT_DEAD, -2: Refund.SCORED, -3: Refund.UNCHARGED}


async def refund(game: Game, job_ids: Iterable[str]) -> list[RefundResult]:
    """Refund each dead, unscored, charged job of ``job_ids`` once (see the module doc); one result each.

    Safe to call any number of times, from any number of processes, for any job (a lost reply: call
    again)."""
    jobs = [check_id(job, JOB) for job in job_ids]
    if not jobs:
        return []
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            for job in jobs:
                pipe.hgetall(game.bus.keys.job(job))
            rows = [bus_rows.decode(raw) for raw in await pipe.execute()]
    results = []
    for job, row in zip(jobs, rows, strict=True):
        state, lane, payload = row.get("state"), row.get("lane", b""), row.get("payload")
        if state != b"dead":
            results.append(RefundResult(job, Refund.NOT_DEAD))
            continue
        try:
            player = check_id(lane.decode(), PLAYER)
        except (AttributeError, CodemojexError):
            player = None
        if player is None:
            results.append(RefundResult(job, Refund.UNCHARGED))
            continue
        round_id = _round_of(payload)
        result = RefundResult(job, Refund.UNCHARGED)
        if round_id is not None:
            result = await _refund_one(game, job, round_id, player)
        if result.outcome is Refund.UNCHARGED:  # no round, or not the round that charged it: the ledger's
            charged_in = await _round_charged(game, player, job)
            if charged_in is not None and charged_in != round_id:
                result = await _refund_one(game, job, charged_in, player)
        results.append(result)
    return results


async def _round_charged(game: Game, player: str, job: str) -> str | None:
    """The round named by the ledger entry that charged ``job`` (newest entries first), or None."""
    key, chunk = game.keys.ledger(player), 1000
    with translate_errors():
        end = await game.redis.llen(key)
        while end > 0:
            for raw in reversed(await game.redis.lrange(key, max(0, end - chunk), end - 1)):
                entry = json.loads(raw)
                if entry.get("job") == job and entry.get("reason") == "guess":
                    return _round_of(raw)
            end -= chunk
    return None


async def _refund_one(game: Game, job: str, round_id: str, player: str) -> RefundResult:
    keys = game.keys
    reply = await game.run(
        "refund",
        [
            game.bus.keys.job(job),
            keys.guess(guess_of(job)),
            keys.player(player),
            keys.wallet(player),
            keys.ledger(player),
            keys.charges(round_id),
            keys.refunds(round_id),
            game.bus.keys.dead,
            game.bus.keys.done,
            game.bus.keys.stats,
        ],
        [job, player],
    )
    code = int(reply[0])
    if code == -4:  # the row's lane is another player's: this charge is not theirs to get back
        return RefundResult(job, Refund.UNCHARGED)
    if code not in _CODES:
        raise ScriptError(f"refund.lua answered {reply!r}")
    if code == -2 and bytes(reply[1]) == b"done":  # scored, its completion lost: finished, not refunded
        log.info("finished scored dead job=%s", job)
    if code == 1:
        currency, amount = bytes(reply[1]).decode().split("=", 1)
        log.info("refunded job=%s %s=%s", job, currency, amount)
        return RefundResult(job, Refund.REFUNDED, (currency, int(amount)))
    return RefundResult(job, _CODES[code])


async def refund_dead(game: Game, *, since_ms: int | None = None, limit: int = PASS_LIMIT) -> RefundPass:
    """One pass over the dead set: refund every dead job dead-lettered at or after the checkpoint (less
    :data:`LOOK_BACK_MS`), and move the checkpoint on. ``since_ms`` overrides the stored checkpoint (0:
    the whole dead set). Idempotent; concurrent passes are fine (the checkpoint only decides where to
    look, and one that goes back a little makes the next pass recheck more, never refund twice)."""
    check_int("limit", limit, 1, 100_000)
    with translate_errors():
        if since_ms is None:
            since_ms = int(await game.redis.get(game.keys.refund_checkpoint) or 0)
        start, highest, checked, refunded = max(0, since_ms - LOOK_BACK_MS), since_ms, 0, []
        while True:
            page = await game.redis.zrangebyscore(
                game.bus.keys.dead, start, "+inf", start=0, num=limit, withscores=True
            )
            if len(page) == limit and page[0][1] == page[-1][1]:  # a page of one millisecond: take it all
                page = await game.redis.zrangebyscore(
                    game.bus.keys.dead, page[0][1], page[0][1], withscores=True
                )
            results = await refund(game, [raw.decode() for raw, _ in page])
            checked += len(results)
            refunded += [result.job for result in results if result.outcome is Refund.REFUNDED]
            if page:
                highest = max(highest, int(page[-1][1]))
            if len(page) < limit:
                break
            start = int(page[-1][1]) + (1 if page[0][1] == page[-1][1] else 0)
        if highest > since_ms:
            await game.redis.set(game.keys.refund_checkpoint, highest)
    return RefundPass(checked, tuple(refunded), highest)


class Refunder:
    """The score worker's refunds: :meth:`on_dead` for the jobs its own fails dead-letter (give it to the
    :class:`echomq.Worker` as ``on_dead``), and :meth:`run` for the periodic pass over the dead set."""

    def __init__(self, game: Game, every_s: float = PASS_EVERY_S) -> None:
        self.game = game
        self.every_s = every_s
        self.checkpoint_ms: int | None = None  # read from Redis by the first pass

    async def on_dead(self, job: Job) -> None:
        await refund(self.game, [job.id])

    async def run_pass(self) -> RefundPass:
        done = await refund_dead(self.game, since_ms=self.checkpoint_ms)
        self.checkpoint_ms = done.checkpoint_ms
        return done

    async def run(self, stopping: asyncio.Event) -> None:
        """A pass now and every ``every_s`` until ``stopping`` is set; an error is logged, the next pass
        tries again."""
        while not stopping.is_set():
            try:
                await self.run_pass()
            except CodemojexError as exc:
                log.warning("refund pass failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self.every_s)

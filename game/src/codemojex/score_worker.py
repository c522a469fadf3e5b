"""The score worker: the one authority that scores guesses.

:func:`handle` is the handler an :class:`echomq.Worker` drains the players' lanes with (through
:func:`echomq.lanes.claim`, which rotates across lanes). For one guess job it reads the payload and the
round's secret, scores the guess with the pure engine (:func:`codemojex.engine.score`), and then runs
``score.lua``, which does the effect and the fenced completion in one atomic step:

* fenced: nothing happens unless the job is active under this claim's attempts token and request id, so
  a worker whose lease was reaped and re-claimed, or a claim of the job id's earlier life (the bus forgot
  the id and admitted it anew, restarting its tokens), is refused (``Finish.STALE``) and changes no
  count, while a retry of this claim's own call whose reply was lost (redis-py retries after a timeout)
  is told ``Finish.DONE``;
* idempotent on the job id: the GES record (the job's body under the ``GES`` brand) is written only if
  absent, and the counts (attempts, leaderboard, proven hits) move only when it is written;
* in admission order: the player's standing is their scored records folded in GES id order (the JOB's
  mint order), with admission times, so it never depends on the order the jobs are delivered in
  (:func:`codemojex.leaderboard.fold_records` is the same fold).

So however often a job is delivered (a crash after the effect, a stall past the lease), and in whatever
order, the guess is scored exactly once in effect and the board is the same. A payload the host would
never write, or a round that does not exist, is dead-lettered at once (:class:`echomq.Permanent`): no
retry can fix it. That includes a round purged by the retention while the job waited, even one whose
rules this worker kept: ``score.lua`` refuses a round without its hash (answer 5), so a late guess
never pays a second solve reward nor recreates the purged round's keys (:mod:`codemojex.retention`).
A dead guess is refunded once (:mod:`codemojex.refunds`); if it is retried after its
refund, ``score.lua`` charges it again before it scores it, or completes it unscored (``unpaid``) when
the wallet cannot pay.

A lost reply of ``score.lua`` costs no count: the script ran whole or not at all, and run again (by a
retry or by the job's redelivery) it finds the record, so nothing moves twice; what it answers is the
fence's view of the job as it now stands.

``score.lua`` is the job's finishing call, so the handler retries it as the worker retries its own
``complete`` and ``fail`` (:data:`RETRY_S`: 0.1, 0.5, 2 s, then every 2 s while the lease holds) when
Redis could not be reached (a cut link, a Redis pause longer than the socket timeout), and so does the
read of a round's rules; the worker's lease keeper renews the lease meanwhile. Without that, a blip of
Redis shorter than the lease would spend the job's try (a failed handler), and with one try left
dead-letter a guess whose score may even have landed (the fail is then refused as stale).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

from codemojex import faults, round_jobs
from codemojex.engine import Feedback, score
from codemojex.errors import InvalidPayload, ScriptError, Unavailable
from codemojex.game import Game, encode_prices, translate_errors
from codemojex.keyboard import Keyboard
from codemojex.keys import guess_of
from codemojex.payload import GuessJob, decode_payload
from codemojex.rounds import keyboard_of
from echomq import Claim, Finish, Job, Permanent
from echomq.core import finish_args

log = logging.getLogger("codemojex.score_worker")

# Pauses between tries of a call that could not reach Redis: the worker's own for its finishing calls
# (echomq.worker.processor). The calls are safe to retry: a read, and score.lua, which is fenced and
# answers a retry of this claim's call whose first try landed with code 4 (done).
RETRY_S = (0.1, 0.5, 2.0)

_T = TypeVar("_T")


def score_call(
    game: Game, claim: Claim, request: GuessJob, feedback: Feedback, *, finish: bool = True
) -> tuple[list[str], list[Any]]:
    """Keys and args of one score.lua call for ``claim`` (shared with the benchmark and the tests)."""
    keys, bus_keys = game.keys, game.bus.keys
    guess_id = guess_of(claim.job)
    return (
        [
            bus_keys.job(claim.job),
            bus_keys.active,
            bus_keys.done,
            bus_keys.stats,
            keys.guess(guess_id),
            keys.standing(request.round),
            keys.board(request.round),
            keys.proven(request.round, request.player),
            keys.scored(request.round),
            keys.events(request.round),
            keys.latency,
            keys.refunds(request.round),
            keys.charges(request.round),
            keys.wallet(request.player),
            keys.ledger(request.player),
            keys.played(request.round, request.player),
            keys.results(request.player),
            keys.rewards(request.round),
            keys.round(request.round),
        ],
        [
            claim.job,
            claim.token,
            claim.request,
            guess_id,
            request.round,
            request.player,
            json.dumps(list(request.guess), ensure_ascii=False),
            feedback.code(),
            feedback.hits,
            feedback.nears,
            len(feedback.marks),
            1 if finish else 0,
            game.settings.events_cap,
            *finish_args(game.bus),
            game.settings.results_kept,
            encode_prices(game.settings.solve_reward),
        ],
    )


@dataclass(frozen=True, slots=True)
class Rules:
    """What scoring needs of a round; it never changes once the round is open, so a worker keeps it."""

    keyboard: Keyboard
    secret: tuple[str, ...]
    length: int


async def read_rules(game: Game, round_id: str) -> Rules:
    """The round's keyboard, secret and length; :class:`Permanent` if there is no such round."""
    keys = game.keys
    with translate_errors():
        async with game.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(keys.round(round_id), "keyboard", "length")
            pipe.get(keys.secret(round_id))
            (keyboard_json, length_text), secret_json = await pipe.execute()
    if keyboard_json is None or secret_json is None:
        raise Permanent(f"no round {round_id}")
    return Rules(keyboard_of(keyboard_json), tuple(json.loads(secret_json)), int(length_text))


async def handle(game: Game, job: Job, rules: MutableMapping[str, Rules] | None = None) -> Finish:
    """Score one guess job and complete it, atomically; see the module doc. ``rules`` caches each
    round's :class:`Rules` across jobs (a round's keyboard and secret never change)."""
    try:
        request = decode_payload(job.payload)
    except InvalidPayload as exc:
        raise Permanent(str(exc)) from None
    if request.player != job.lane:
        raise Permanent(f"the guess of {request.player} came on lane {job.lane}")
    known = rules.get(request.round) if rules is not None else None
    if known is None:
        known = await _retried(job, lambda: read_rules(game, request.round))
        if rules is not None:
            rules[request.round] = known
    keyboard, secret, length = known.keyboard, known.secret, known.length
    if len(request.guess) != length or any(key not in keyboard for key in request.guess):
        raise Permanent(f"the guess {''.join(request.guess)!r} is not {length} keys of the round's keyboard")
    feedback = score(secret, request.guess)
    if faults.fires("score.before_effect"):
        faults.stall()  # the fault point: a worker stalled past its lease, then resumed
    split = faults.fires("score.after_effect") or (
        faults.armed(faults.REQUESTED) and await faults.take_crash_request(game, job.id)
    )
    call = score_call(game, job.claim, request, feedback, finish=not split)
    reply = await _retried(job, lambda: game.run("score", *call))
    code = int(reply[0])
    if code == 2:
        faults.crash()  # the fault point: effect written, acknowledgement never sent
    if code == 1:
        log.debug("scored job=%s wrote=%s code=%s", job.id, reply[1], feedback.code())
        return Finish.DONE
    if code == 3:
        log.info("refunded job=%s could not be paid again: completed unscored", job.id)
        return Finish.DONE
    if code == 4:  # a retry of this call (its reply was lost): that first call completed the job
        return Finish.DONE
    if code == 5:  # purged by the retention while the job waited: nothing to score it into
        if rules is not None:
            rules.pop(request.round, None)
        raise Permanent(f"no round {request.round} (purged)")
    if code in (0, -1):
        return Finish.STALE
    raise ScriptError(f"score.lua answered {reply!r}")


async def _retried(job: Job, call: Callable[[], Awaitable[_T]]) -> _T:
    """Await ``call()``, again after each :class:`Unavailable` (pauses :data:`RETRY_S`, then the last
    one repeated) for as long as this run holds the lease: an outage shorter than the lease must not
    spend the job's try. Once the lease is revoked the error is raised (another run may own the job: the
    fence would refuse the call anyway); an outage past the lease ends the same way when Redis answers."""
    pauses = iter(RETRY_S)
    while True:
        try:
            return await call()
        except Unavailable as exc:
            if job.revoked.is_set():
                raise
            pause = next(pauses, RETRY_S[-1])
            log.info("redis unavailable job=%s retry_in_s=%s error=%s", job.id, pause, exc)
        await asyncio.sleep(pause)


class ScoreWorker:
    """``ScoreWorker(game).handle`` is the handler to give an :class:`echomq.Worker`; it keeps the rules
    of the latest rounds it scored (at most :data:`RULES_KEPT`), so a job costs one script call."""

    def __init__(self, game: Game) -> None:
        self.game = game
        self.rules: _Recent = _Recent(RULES_KEPT)

    async def handle(self, job: Job) -> Finish | bytes:
        if job.lane == round_jobs.LANE:  # the operator's open / close, carried from the web host
            return await round_jobs.handle(self.game, job)
        return await handle(self.game, job, self.rules)


RULES_KEPT = 64


class _Recent(OrderedDict[str, Rules]):
    """A mapping that forgets its least recently set entries past ``size``."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, key: str, value: Rules) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)

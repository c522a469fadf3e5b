"""The score worker across a Redis blip shorter than its lease: a Redis pause longer than the client's
socket timeout, or a cut link. Its score call is the job's finishing call, so, like the worker's own
finishes, it is retried until Redis answers: the guess is scored once and the job completed on its one
try, never failed (with one try left: dead-lettered) for want of a reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from codemojex import guesses, players, rounds
from codemojex.game import Game, GameSettings
from codemojex.keys import guess_of
from codemojex.score_worker import Rules, handle, read_rules
from echomq import Finish, Job
from echomq.testing.proxy import Proxy
from echomq.testing.server import RedisProcess
from tests.support.game import KEYBOARD, SECRET, GameProbe, claim_job, text
from tests.support.pausing import (
    after,
    pause,
    stoppable_server,  # noqa: F401  (the `server` fixture)
)

SOCKET_TIMEOUT_S = 0.5
LEASE_MS = 3000


async def claimed_guess(game: Game) -> tuple[Job, str, dict[str, Rules]]:
    """One guess of a player, claimed under a LEASE_MS lease; the round's rules as a worker keeps them."""
    the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
    ada = await players.register(game, "Ada")
    await guesses.submit(game, the_round.id, ada.id, text(SECRET))
    job = await claim_job(game.bus, lease_ms=LEASE_MS)
    # Pooled connections open before the fault: a command that connects during a pause fails in the
    # handshake, before it is sent, and so would lose nothing.
    await asyncio.gather(*(game.redis.ping() for _ in range(8)))
    return job, the_round.id, {the_round.id: await read_rules(game, the_round.id)}


@pytest.fixture
async def direct(server: RedisProcess) -> AsyncIterator[Game]:
    """A game whose client gives up on a reply after SOCKET_TIMEOUT_S (as the conformance workers')."""
    url = f"{server.url}?socket_timeout={SOCKET_TIMEOUT_S}"
    game = Game.from_url(url, "outage", GameSettings(max_attempts=1))
    yield game
    await game.aclose()


@pytest.fixture
def probe(server: RedisProcess, direct: Game) -> Iterator[GameProbe]:
    client = redis.Redis.from_url(server.url)
    yield GameProbe.of(client, direct)
    client.close()


async def scored_once(game: Game, probe: GameProbe, job: Job, round_id: str) -> None:
    assert (await game.bus.inspect(job.id)).state.value == "done"
    assert probe.records(round_id) == [guess_of(job.id)]
    assert probe.standing(round_id, job.lane).attempts == 1
    assert probe.bus.counters().get("stale", 0) == 0


async def test_a_score_call_whose_reply_is_lost_in_a_pause_completes_the_job(server, direct, probe):
    """Redis stops 1.5 socket timeouts with the score call sent: its retry is told the call completed it."""
    job, round_id, rules = await claimed_guess(direct)
    pause(server, 1.5 * SOCKET_TIMEOUT_S)

    assert await handle(direct, job, rules) is Finish.DONE
    await scored_once(direct, probe, job, round_id)


@pytest.mark.parametrize("mode", ["reset", "blackhole"])
async def test_a_score_call_across_a_cut_link_completes_the_job(server, probe, mode):
    """The link to Redis is cut for 0.6 s as the score call goes out: it is retried once restored."""
    with Proxy(server.port) as proxy:
        url = f"{proxy.url}?socket_timeout={SOCKET_TIMEOUT_S}"
        async with Game.from_url(url, "outage", GameSettings(max_attempts=1)) as game:
            job, round_id, rules = await claimed_guess(game)
            proxy.cut(mode)
            after(0.6, proxy.restore)

            assert await handle(game, job, rules) is Finish.DONE
            await scored_once(game, probe, job, round_id)


async def test_a_score_call_across_a_cut_longer_than_the_retry_pauses_completes_the_job(server, probe):
    """The link is cut for 4 s, longer than the first retry pauses add up to (2.6 s) but shorter than
    the lease: the call is retried until the link is back, and the job's one try is not spent."""
    with Proxy(server.port) as proxy:
        url = f"{proxy.url}?socket_timeout={SOCKET_TIMEOUT_S}"
        async with Game.from_url(url, "outage", GameSettings(max_attempts=1)) as game:
            job, round_id, rules = await claimed_guess(game)
            proxy.cut("reset")
            after(4.0, proxy.restore)

            assert await handle(game, job, rules) is Finish.DONE
            await scored_once(game, probe, job, round_id)


async def test_a_revoked_claim_is_not_retried(server, direct, probe):
    """A claim whose lease was reaped meanwhile gets the error at once: another run may own its job."""
    job, _, rules = await claimed_guess(direct)
    job.revoked.set()
    pause(server, 1.5 * SOCKET_TIMEOUT_S)

    with pytest.raises(ConnectionError):
        await handle(direct, job, rules)

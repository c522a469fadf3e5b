"""Memory an attacker leaves for free (issue 12, adversary): a guess refused for the moment (no funds,
a closed round) costs nothing, yet its ``Idempotency-Key`` is kept for 24 h so that a retry after a
top-up cannot pay twice (:mod:`codemojex.web.idempotency`). A player with an empty wallet, one fresh
key per request, leaves one key per refused request: at the per-address guess rate (10 a second) some
864,000 keys a day per client, under ``noeviction``. The defence: a key counts the requests in flight
under it and is cut to ten minutes once none is left and none was admitted; the tests below check that
no interleaving of copies, refusals, admissions and retries can then pay twice."""

from __future__ import annotations

import dataclasses
import hashlib
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import redis.asyncio

from codemojex import wallet
from codemojex.game import Game
from codemojex.keys import JOB, PLAYER, GameKeys
from codemojex.web import idempotency
from codemojex.web.admission import Limits
from codemojex.web.buckets import Rate
from codemojex.web.problems import Problem
from echomq import ids
from tests.support.web import FRUIT, open_round, run


@pytest.fixture
def host_config(host_config):
    fast = Rate(1000, 1)  # the attack at the limiter's pace, sped up: the limits are not what it tests
    return dataclasses.replace(host_config, limits=Limits(guess_per_address=fast, guess_per_player=fast))


def test_refused_guesses_with_fresh_keys_leave_no_day_long_keys(redis_server, tag, operator, join):
    round_id = open_round(operator)["round_id"]
    player_id, ada = join("Ada")
    path = f"/api/rounds/{round_id}/guesses"
    admitted = 0
    for n in range(40):
        reply = ada.post(path, json={"guess": FRUIT[:6]}, headers={"Idempotency-Key": f"k{n}"})
        admitted += reply.status_code == 202
        assert reply.status_code in (202, 402), reply.text
    assert 0 < admitted < 40  # the round's allowance ran out: the rest were refused for no funds
    client = redis.Redis.from_url(redis_server.url)
    try:
        keys = GameKeys(tag)
        kept = list(client.scan_iter(match=f"{keys.prefix}idempotency:{player_id}:*", count=1000))
        long_lived = [key for key in kept if client.pttl(key) > 3_600_000]
    finally:
        client.close()
    assert len(long_lived) <= admitted


HOUR_MS = 3_600_000


def _claims(redis_server, tag, steps):
    """Run ``steps(game, player_id)`` (a coroutine function) on a Game of the test's Redis."""

    async def go():
        async with Game.from_url(redis_server.url, tag) as game:
            return await steps(game, ids.mint(PLAYER), redis.asyncio.Redis.from_url(redis_server.url))

    return run(go())


def test_a_refused_copy_does_not_cut_the_key_while_another_copy_is_in_flight(redis_server, tag):
    """Two copies of one keyed request claim the key; the first is refused, the second (after a top-up)
    admitted: the refusal must not cut the key's life while the second is in flight, nor after it, so a
    later retry still names the one JOB (a duplicate) and never pays twice."""

    async def steps(game, player_id, raw):
        key = game.keys.idempotency(player_id, hashlib.sha256(b"k").hexdigest())
        job, stored = await idempotency.job_for_key(game, player_id, "k", "d")
        copy, copy_stored = await idempotency.job_for_key(game, player_id, "k", "d")
        assert (copy, stored, copy_stored) == (job, True, False)
        await idempotency.release(game, player_id, "k", job, admitted=False)  # the first: refused
        assert await raw.pttl(key) > HOUR_MS  # the copy is still in flight: the full window stays
        await idempotency.release(game, player_id, "k", job, admitted=True)  # the copy: admitted
        retry, _ = await idempotency.job_for_key(game, player_id, "k", "d")
        await idempotency.release(game, player_id, "k", job, admitted=False)  # a refused retry
        assert retry == job
        assert await raw.pttl(key) > HOUR_MS  # a guess was admitted under it: kept the full window
        await raw.aclose()

    _claims(redis_server, tag, steps)


def test_the_last_refused_copy_out_cuts_the_key_and_a_later_claim_restores_it(redis_server, tag):
    async def steps(game, player_id, raw):
        key = game.keys.idempotency(player_id, hashlib.sha256(b"k").hexdigest())
        job, _ = await idempotency.job_for_key(game, player_id, "k", "d")
        await idempotency.job_for_key(game, player_id, "k", "d")
        await idempotency.release(game, player_id, "k", job, admitted=False)
        await idempotency.release(game, player_id, "k", job, admitted=False)
        assert 0 < await raw.pttl(key) <= idempotency.REFUSED_MS  # none in flight, none admitted
        retry, stored = await idempotency.job_for_key(game, player_id, "k", "d")  # a retry after a top-up
        assert (retry, stored) == (job, False)
        assert await raw.pttl(key) > HOUR_MS  # in flight again: the full window while it may be admitted
        with pytest.raises(Problem) as conflict:
            await idempotency.job_for_key(game, player_id, "k", "other")
        assert conflict.value.code == "idempotency_conflict"
        await idempotency.release(game, player_id, "k", job, admitted=False)
        assert 0 < await raw.pttl(key) <= idempotency.REFUSED_MS  # the conflict counted nothing
        await raw.aclose()

    _claims(redis_server, tag, steps)


def test_a_key_in_the_old_form_is_read_and_kept_as_it_is(redis_server, tag):
    async def steps(game, player_id, raw):
        key = game.keys.idempotency(player_id, hashlib.sha256(b"old").hexdigest())
        old_job = ids.mint(JOB)
        await raw.set(key, f"{old_job} d", px=idempotency.KEPT_MS)
        job, stored = await idempotency.job_for_key(game, player_id, "old", "d")
        assert (job, stored) == (old_job, False)
        await idempotency.release(game, player_id, "old", job, admitted=False)
        assert await raw.pttl(key) > HOUR_MS
        await raw.aclose()

    _claims(redis_server, tag, steps)


def test_concurrent_copies_around_a_top_up_name_one_job_paid_once(served, operator, join):
    """Copies of one keyed request race a top-up (some refused for no funds, some admitted), then more
    retries come: whatever the interleaving, every answer names the one JOB and it is paid once."""
    round_id = open_round(operator, prices=[{"currency": "gem", "amount": 2}])["round_id"]
    player_id, ada = join()
    path = f"/api/rounds/{round_id}/guesses"

    def post(_: int):
        return ada.post(path, json={"guess": FRUIT[:6]}, headers={"Idempotency-Key": "raced"})

    async def top_up() -> None:
        async with Game.from_url(served.config.redis_url, served.config.tag) as game:
            await wallet.credit(game, player_id, "gem", 4, reason="prize")

    with ThreadPoolExecutor(8) as pool:
        early = list(pool.map(post, range(8)))
        racing = pool.map(post, range(8))
        run(top_up())
        replies = [*early, *racing, *pool.map(post, range(4))]
    assert {reply.status_code for reply in replies} <= {202, 402}, [r.text for r in replies]
    jobs = {(r.json() if r.status_code == 202 else r.json()["error"])["job_id"] for r in replies}
    assert len(jobs) == 1, jobs
    assert post(0).status_code == 202  # funded now: admitted, or a duplicate of the admitted one
    charges = [e for e in ada.get("/api/wallet").json()["ledger"] if e["reason"] == "guess"]
    assert [(e["job_id"], e["delta"]) for e in charges] == [(jobs.pop(), -2)]  # paid once

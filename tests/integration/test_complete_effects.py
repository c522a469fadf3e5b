"""complete_effects.lua through Bus.complete(effects=...): the application's Redis writes and the fenced
completion in one atomic step, every effect or none."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from echomq import (
    EffectRefused,
    Effects,
    Finish,
    InvalidEffect,
    InvalidToken,
    PayloadTooLarge,
    ScriptError,
    ids,
)
from echomq.errors import translate_redis_errors


async def _claimed(bus, probe):
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="L", payload=b"p", max_attempts=5)
    [claim] = await bus.claim()
    assert probe.check()[job] == "active"
    return claim


def app(bus, name: str) -> str:
    """A key of the application's, in the bus's slot (its hash tag)."""
    return f"app:{{{bus.tag}}}:{name}"


def app_state(client, bus) -> dict[str, Any]:
    """Every application key of this test, read whole by its type (with its ttl set or not)."""
    state: dict[str, Any] = {}
    for raw in sorted(client.scan_iter(match=f"app:{{{bus.tag}}}:*")):
        key = raw.decode()
        kind = client.type(raw).decode()
        read = {
            "string": client.get,
            "hash": client.hgetall,
            "set": client.smembers,
            "list": lambda k: client.lrange(k, 0, -1),
            "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
            "stream": lambda k: [fields for _, fields in client.xrange(k)],
        }[kind]
        state[key] = (kind, read(raw), client.pttl(raw) > 0)
    return state


async def test_every_command_applies_with_the_completion(bus, probe, sync_redis):
    """One call applies each command of the set and completes the job: DONE, the job done with its
    result, and each key holds what its commands wrote."""
    claim = await _claimed(bus, probe)
    sync_redis.set(app(bus, "gone"), "x")
    sync_redis.sadd(app(bus, "tags"), "old")
    sync_redis.hset(app(bus, "order"), "note", "drop")
    fx = (
        Effects()
        .set(app(bus, "name"), "Ada")
        .set(app(bus, "token"), b"\x00\xff", px=60_000)
        .delete(app(bus, "gone"))
        .incrby(app(bus, "orders"), 3)
        .pexpire(app(bus, "orders"), 60_000)
        .hset(app(bus, "order"), "state", "paid")
        .hdel(app(bus, "order"), "note")
        .hincrby(app(bus, "order"), "items", 2)
        .zadd(app(bus, "board"), 10, "ada")
        .zincrby(app(bus, "board"), 2.5, "ada")
        .zadd(app(bus, "board"), 1, "bob")
        .zrem(app(bus, "board"), "bob")
        .sadd(app(bus, "tags"), "new", "vip")
        .srem(app(bus, "tags"), "old")
        .rpush(app(bus, "log"), "b", "c")
        .lpush(app(bus, "log"), "a")
        .xadd(app(bus, "events"), {"kind": "paid", "n": 1}, maxlen=100)
    )
    assert len(fx) == 17
    assert await bus.complete(claim, b"receipt", effects=fx) is Finish.DONE
    assert probe.check() == {claim.job: "done"}
    assert probe.row(claim.job)["result"] == b"receipt"
    assert probe.counters()["completed"] == 1
    assert app_state(sync_redis, bus) == {
        app(bus, "board"): ("zset", [(b"ada", 12.5)], False),
        app(bus, "events"): ("stream", [{b"kind": b"paid", b"n": b"1"}], False),
        app(bus, "log"): ("list", [b"a", b"b", b"c"], False),
        app(bus, "name"): ("string", b"Ada", False),
        app(bus, "order"): ("hash", {b"state": b"paid", b"items": b"2"}, False),
        app(bus, "orders"): ("string", b"3", True),
        app(bus, "tags"): ("set", {b"new", b"vip"}, False),
        app(bus, "token"): ("string", b"\x00\xff", True),
    }


async def test_a_stream_is_kept_to_its_maxlen(bus, probe, sync_redis):
    """XADD with maxlen and approximate=False keeps exactly that many entries, the newest."""
    for n in range(4):
        claim = await _claimed(bus, probe)
        fx = Effects().xadd(app(bus, "s"), {"n": n}, maxlen=2, approximate=False)
        assert await bus.complete(claim, effects=fx) is Finish.DONE
    assert [f[b"n"] for _, f in sync_redis.xrange(app(bus, "s"))] == [b"2", b"3"]


async def test_a_reaped_and_reclaimed_job_refuses_the_old_claims_effects(bus, probe, sync_redis):
    """A stale worker (lease reaped, job re-claimed) gets STALE and none of its effects applies; the new
    claim's effects apply once."""
    first = await _claimed(bus, probe)
    probe.expire(first.job)
    assert (await bus.sweep()).reclaimed == 1
    [second] = await bus.claim()
    assert second.token == first.token + 1
    before = probe.snapshot()
    stale = Effects().incrby(app(bus, "paid"), 100).set(app(bus, "by"), "first")
    assert await bus.complete(first, b"late", effects=stale) is Finish.STALE
    assert app_state(sync_redis, bus) == {}
    assert probe.counters()["stale"] == 1
    probe.assert_unchanged(before, stale=1)

    fresh = Effects().incrby(app(bus, "paid"), 100).set(app(bus, "by"), "second")
    assert await bus.complete(second, b"ok", effects=fresh) is Finish.DONE
    assert sync_redis.get(app(bus, "paid")) == b"100"
    assert sync_redis.get(app(bus, "by")) == b"second"
    # The first worker, later still: its job is done under another claim; nothing of its applies.
    assert await bus.complete(first, b"later", effects=stale) is Finish.STALE
    assert sync_redis.get(app(bus, "paid")) == b"100"
    assert probe.row(first.job)["result"] == b"ok"


async def test_a_claim_whose_job_went_back_to_its_lane_applies_nothing(bus, probe, sync_redis):
    """A stale claim of a job queued again (not re-claimed yet) is refused likewise."""
    claim = await _claimed(bus, probe)
    probe.expire(claim.job)
    await bus.sweep()
    assert await bus.complete(claim, effects=Effects().sadd(app(bus, "s"), "x")) is Finish.STALE
    assert app_state(sync_redis, bus) == {}
    assert probe.check() == {claim.job: "queued"}


async def test_the_same_call_again_is_done_and_applies_nothing(bus, probe, sync_redis):
    """The retry of a call that landed (its reply lost) answers DONE and applies no effect again."""
    claim = await _claimed(bus, probe)
    fx = Effects().incrby(app(bus, "n"), 1).rpush(app(bus, "log"), "once")
    assert await bus.complete(claim, b"r", effects=fx) is Finish.DONE
    before, app_before = probe.snapshot(), app_state(sync_redis, bus)
    assert await bus.complete(claim, b"r", effects=fx) is Finish.DONE
    probe.assert_unchanged(before)
    assert app_state(sync_redis, bus) == app_before
    assert sync_redis.get(app(bus, "n")) == b"1"
    assert probe.counters()["completed"] == 1


@pytest.mark.parametrize(
    ("prepare", "fx", "reason"),
    [
        (lambda r, k: r.set(k("h"), "s"), lambda k: Effects().hset(k("h"), "f", "v"), "holds a string"),
        (lambda r, k: r.hset(k("n"), "f", "v"), lambda k: Effects().incrby(k("n"), 1), "holds a hash"),
        (lambda r, k: r.set(k("n"), "abc"), lambda k: Effects().incrby(k("n"), 1), "not an integer"),
        (lambda r, k: r.set(k("n"), "007"), lambda k: Effects().incrby(k("n"), 1), "not an integer"),
        (lambda r, k: r.set(k("n"), 2**53 - 1), lambda k: Effects().incrby(k("n"), 1), "2\\^53"),
        (lambda r, k: r.set(k("n"), 2**62), lambda k: Effects().incrby(k("n"), -1), "not an integer"),
        (lambda r, k: r.hset(k("h"), "f", "1.5"), lambda k: Effects().hincrby(k("h"), "f", 1), "not an"),
        (lambda r, k: r.rpush(k("z"), "a"), lambda k: Effects().zadd(k("z"), 1, "m"), "holds a list"),
        (lambda r, k: r.sadd(k("l"), "a"), lambda k: Effects().lpush(k("l"), "m"), "holds a set"),
        (lambda r, k: r.zadd(k("s"), {"a": 1}), lambda k: Effects().sadd(k("s"), "m"), "holds a zset"),
        (lambda r, k: r.set(k("x"), "v"), lambda k: Effects().xadd(k("x"), {"a": 1}, maxlen=5), "a string"),
        (
            lambda r, k: r.xadd(k("x"), {"a": 1}, id="18446744073709551615-18446744073709551615"),
            lambda k: Effects().xadd(k("x"), {"a": 1}, maxlen=5),
            "last id",
        ),
    ],
)
async def test_an_effect_that_cannot_apply_refuses_the_whole_call(
    bus, probe, sync_redis, prepare, fx, reason
):
    """Effects found unable to apply (a key of another type, a counter that is not an integer or would
    leave the safe range, a stream out of ids) raise EffectRefused; the writes before it in the program
    did not run, the job is still active, and a call that can apply then completes it."""
    claim = await _claimed(bus, probe)
    prepare(sync_redis, lambda name: app(bus, name))
    program = Effects().incrby(app(bus, "first"), 1).rpush(app(bus, "log"), "x")
    for command in fx(lambda name: app(bus, name)).commands:
        program._commands.append(command)  # the refused command last, after writes that could apply
    before, app_before = probe.snapshot(), app_state(sync_redis, bus)
    with pytest.raises(EffectRefused, match=reason):
        await bus.complete(claim, b"r", effects=program)
    probe.assert_unchanged(before)
    assert app_state(sync_redis, bus) == app_before
    assert probe.check() == {claim.job: "active"}
    assert await bus.complete(claim, effects=Effects().incrby(app(bus, "first"), 1)) is Finish.DONE
    assert sync_redis.get(app(bus, "first")) == b"1"


async def test_the_check_follows_the_programs_own_writes(bus, probe, sync_redis):
    """The check sees the program's earlier effects: a string deleted may become a hash, a value set may
    be counted on, a field written as text may not be incremented."""
    claim = await _claimed(bus, probe)
    sync_redis.set(app(bus, "k"), "was a string")
    fx = (
        Effects()
        .delete(app(bus, "k"))
        .hset(app(bus, "k"), "f", "v")
        .set(app(bus, "n"), 41)
        .incrby(app(bus, "n"), 1)
        .hset(app(bus, "h"), "c", 5)
        .hincrby(app(bus, "h"), "c", 1)
        .hincrby(app(bus, "h"), "c", 1)
    )
    assert await bus.complete(claim, effects=fx) is Finish.DONE
    assert sync_redis.hgetall(app(bus, "k")) == {b"f": b"v"}
    assert sync_redis.get(app(bus, "n")) == b"42"
    assert sync_redis.hget(app(bus, "h"), "c") == b"7"

    claim = await _claimed(bus, probe)
    refused = Effects().set(app(bus, "m"), "text").incrby(app(bus, "m"), 1)
    with pytest.raises(EffectRefused, match="not an integer"):
        await bus.complete(claim, effects=refused)
    assert sync_redis.exists(app(bus, "m")) == 0
    refused = Effects().incrby(app(bus, "c"), 2**53 - 2).incrby(app(bus, "c"), 2)
    with pytest.raises(EffectRefused, match="2\\^53"):
        await bus.complete(claim, effects=refused)
    assert sync_redis.exists(app(bus, "c")) == 0


BAD_BUILDS = [
    lambda k: Effects().set(k, 1.5),  # a float value
    lambda k: Effects().set(k, None),
    lambda k: Effects().set(k, True),
    lambda k: Effects().set(k, "\ud800"),  # no UTF-8 for it
    lambda k: Effects().set(k, "v", px=0),
    lambda k: Effects().set(k, "v", px=True),
    lambda k: Effects().set("", "v"),
    lambda k: Effects().set("x" * 1025, "v"),
    lambda k: Effects().set(7, "v"),
    lambda k: Effects().set("emq:{x}:active", "v"),  # EchoMQ's own keys
    lambda k: Effects().delete(b"emq:{x}:job:JOB"),
    lambda k: Effects().pexpire(k, -1),
    lambda k: Effects().incrby(k, 2**53),
    lambda k: Effects().incrby(k, "1"),
    lambda k: Effects().hincrby(k, "f", 1.0),
    lambda k: Effects().zadd(k, float("nan"), "m"),
    lambda k: Effects().zadd(k, "1", "m"),
    lambda k: Effects().zincrby(k, float("inf"), "m"),
    lambda k: Effects().hdel(k),
    lambda k: Effects().sadd(k),
    lambda k: Effects().rpush(k, *["v"] * 1001),
    lambda k: Effects().xadd(k, {}, maxlen=5),
    lambda k: Effects().xadd(k, {"a": 1}, maxlen=0),
    lambda k: Effects().xadd(k, [("a", 1)], maxlen=5),
    lambda k: Effects().xadd(k, {"a": 1}, maxlen=5, approximate="yes"),
    lambda k: Effects().set(k, b"x" * (1024 * 1024)),
]


@pytest.mark.parametrize("build", BAD_BUILDS)
def test_bad_effects_are_refused_by_the_builder(build):
    """Each ill-formed command raises InvalidEffect (an InvalidInput) where it is written."""
    with pytest.raises(InvalidEffect):
        build("app:{t}:k")


def test_a_call_holds_at_most_max_effects():
    """The thousand-and-first command of one Effects is refused."""
    fx = Effects()
    for n in range(1000):
        fx.sadd("app:{t}:s", n)
    with pytest.raises(InvalidEffect, match="at most 1000"):
        fx.sadd("app:{t}:s", "one more")
    assert len(fx) == 1000


async def test_bad_effects_or_a_bad_claim_send_nothing(bus, probe, sync_redis):
    """Something not an Effects, or a claim or result that complete refuses, raises before anything is
    sent: the job stays active, no key moves."""
    claim = await _claimed(bus, probe)
    before = probe.snapshot()
    fx = Effects().sadd(app(bus, "s"), "x")
    with pytest.raises(InvalidEffect):
        await bus.complete(claim, effects=[("SADD", app(bus, "s"), "x")])  # type: ignore[arg-type]
    with pytest.raises(PayloadTooLarge):
        await bus.complete(claim, b"x" * (bus.settings.max_payload + 1), effects=fx)
    with pytest.raises(InvalidToken):
        await bus.complete(type(claim)(claim.job, claim.lane, 0), effects=fx)
    probe.assert_unchanged(before)
    assert app_state(sync_redis, bus) == {}


async def test_an_empty_effects_is_a_plain_complete(bus, probe):
    """No command at all: the job completes as complete() does."""
    claim = await _claimed(bus, probe)
    assert await bus.complete(claim, b"r", effects=Effects()) is Finish.DONE
    assert probe.check() == {claim.job: "done"}


@pytest.mark.parametrize(
    "program",
    [
        ["EVAL", 1, 1, "return 1"],  # not a command of the set
        ["FLUSHALL", 1, 0],
        ["SET", 2, 1, "v"],  # no such key position
        ["SET", 1, 2, "v", "EX"],  # SET value [PX ms] only
        ["HSET", 1, 3, "f", "v", "g"],  # odd pairs
        ["PEXPIRE", 1, 1, "-5"],
        ["ZADD", 1, 2, "nan", "m"],
        ["INCRBY", 1, 2, "1", "2"],
    ],
)
async def test_a_hand_made_malformed_program_is_refused_before_any_write(bus, probe, sync_redis, program):
    """The script itself reads the whole program before its first write: a command outside the set, a
    key it does not declare or a wrong arity raises, and nothing changed (not even the fence's counter)."""
    claim = await _claimed(bus, probe)
    keys = [bus.keys.job(claim.job), bus.keys.active, bus.keys.done, bus.keys.stats, app(bus, "k")]
    args = [claim.job, claim.token, claim.request, b"", bus.keys.prefix, 3600_000, 86_400_000]
    first = ["SET", 1, 1, "written?"]
    before = probe.snapshot()
    with pytest.raises(ScriptError, match="effects:"), translate_redis_errors():
        await bus.scripts.run("complete_effects", keys, [*args, 2, *first, *program])
    probe.assert_unchanged(before)
    assert app_state(sync_redis, bus) == {}
    with pytest.raises(ScriptError, match="EchoMQ"), translate_redis_errors():  # a raw call's key of EchoMQ
        await bus.scripts.run("complete_effects", [*keys[:4], bus.keys.ring], [*args, 1, "DEL", 1, 0])
    assert probe.check() == {claim.job: "active"}


async def test_a_revoked_jobs_claim_applies_none_of_its_effects(bus, probe, sync_redis):
    """A job revoked while its worker runs it: the worker's complete with effects is STALE and none of
    them applies."""
    claim = await _claimed(bus, probe)
    await bus.revoke(claim.job, "operator")
    fx = Effects().incrby(app(bus, "n"), 1).set(app(bus, "by"), "revoked run")
    assert await bus.complete(claim, b"late", effects=fx) is Finish.STALE
    assert app_state(sync_redis, bus) == {}
    assert probe.check()[claim.job] == "dead"


async def test_a_waiter_for_the_result_wakes_when_the_effects_complete_the_job(bus, probe, sync_redis):
    """bus.result waits for a job completed with effects and gets its result, the effects already there."""
    claim = await _claimed(bus, probe)
    waiter = asyncio.ensure_future(bus.result(claim.job, timeout=10))
    await asyncio.sleep(0.05)  # the waiter is waiting (a result already there would be read anyway)
    assert await bus.complete(claim, b"answer", effects=Effects().incrby(app(bus, "n"), 7)) is Finish.DONE
    assert await waiter == b"answer"
    assert sync_redis.get(app(bus, "n")) == b"7"

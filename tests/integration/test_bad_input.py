"""Bad input gets a clear, typed error from echomq.errors and changes nothing on the server.

Every case runs against a bus that holds a job in each state, and compares the type and full value of
every key of the bus before and after the refused call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from echomq import (
    MAX_PAYLOAD,
    Admission,
    Bus,
    Claim,
    EchoMQError,
    InvalidId,
    InvalidInput,
    InvalidLane,
    InvalidOption,
    InvalidPayload,
    InvalidTag,
    InvalidToken,
    NewJob,
    PayloadTooLarge,
    Settings,
    UnknownJob,
    ids,
)
from tests.support.probe import Probe

KIB_64 = 64 * 1024


@dataclasses.dataclass
class World:
    """A bus holding one job in every state, and the claims that hold the active ones."""

    bus: Bus
    probe: Probe
    queued: str
    active: Claim
    done: Claim
    dead: str


@pytest.fixture
async def world(bus, sync_redis) -> World:
    """A bus with a queued, a delayed, an active, a done and a dead job."""
    probe = Probe(sync_redis, bus.keys)
    probe.watch(bus)
    minted = [ids.mint("JOB") for _ in range(5)]
    await bus.enqueue_many(
        [
            NewJob(minted[0], "A", b"done"),
            NewJob(minted[1], "B", b"active"),
            NewJob(minted[2], "C", b"dead", max_attempts=1),
            NewJob(minted[3], "D", b"later", delay_ms=600_000),
        ]
    )
    done, active, dead = await bus.claim(count=3, lease_ms=600_000)
    await bus.complete(done, b"result")
    await bus.fail(dead, "boom")
    await bus.enqueue(minted[4], lane="A", payload=b"queued")
    assert probe.check() == {
        minted[0]: "done",
        minted[1]: "active",
        minted[2]: "dead",
        minted[3]: "delayed",
        minted[4]: "queued",
    }
    return World(bus, probe, minted[4], active, done, dead.job)


Call = Callable[[World], Awaitable[Any]]


def _good() -> str:
    return ids.mint("JOB")


def _with(claim: Claim, **changes: Any) -> Claim:
    return dataclasses.replace(claim, **changes)


ILL_FORMED_IDS: list[tuple[str, object]] = [
    ("short", "JOB123"),
    ("lower case", "job" + _good()[3:].lower()),
    ("wrong brand", ids.mint("PLR")),
    ("rebranded", ids.rebrand(_good(), "GES")),
    ("letter U", _good()[:-1] + "U"),
    ("first digit 7", "JOB7" + _good()[4:]),
    ("too long", _good() + "0"),
    ("bytes", _good().encode()),
    ("int", 12345),
    ("None", None),
    ("key injection", "JOB:../../ring"),
]


def _id_cases() -> list[tuple[str, Call, type[EchoMQError]]]:
    cases: list[tuple[str, Call, type[EchoMQError]]] = []
    for why, bad in ILL_FORMED_IDS:
        cases += [
            (f"enqueue {why}", lambda w, b=bad: w.bus.enqueue(b, lane="A", payload=b""), InvalidId),
            (f"enqueue_many {why}", lambda w, b=bad: w.bus.enqueue_many([NewJob(b, "A", b"")]), InvalidId),
            (f"complete {why}", lambda w, b=bad: w.bus.complete(_with(w.active, job=b)), InvalidId),
            (f"fail {why}", lambda w, b=bad: w.bus.fail(_with(w.active, job=b), "x"), InvalidId),
            (f"extend {why}", lambda w, b=bad: w.bus.extend(_with(w.active, job=b), 1000), InvalidId),
            (f"release {why}", lambda w, b=bad: w.bus.release(_with(w.active, job=b)), InvalidId),
            (f"retry_dead {why}", lambda w, b=bad: w.bus.retry_dead(b), InvalidId),
            (f"inspect {why}", lambda w, b=bad: w.bus.inspect(b), InvalidId),
        ]
    return cases


BAD_LANES: list[tuple[str, object]] = [
    ("empty", ""),
    ("braces", "{cm}"),
    ("space", "a b"),
    ("newline", "a\n"),
    ("too long", "x" * 129),
    ("non-str", 42),
]


def _lane_cases() -> list[tuple[str, Call, type[EchoMQError]]]:
    cases: list[tuple[str, Call, type[EchoMQError]]] = []
    for why, bad in BAD_LANES:
        cases += [
            (
                f"enqueue lane {why}",
                lambda w, b=bad: w.bus.enqueue(_good(), lane=b, payload=b""),
                InvalidLane,
            ),
            (f"fail lane {why}", lambda w, b=bad: w.bus.fail(_with(w.active, lane=b), "x"), InvalidLane),
            (f"release lane {why}", lambda w, b=bad: w.bus.release(_with(w.active, lane=b)), InvalidLane),
            (f"complete lane {why}", lambda w, b=bad: w.bus.complete(_with(w.active, lane=b)), InvalidLane),
        ]
    return cases


UNKNOWN_CASES: list[tuple[str, Call, type[EchoMQError]]] = [
    ("complete unknown", lambda w: w.bus.complete(_with(w.active, job=_good())), UnknownJob),
    ("fail unknown", lambda w: w.bus.fail(_with(w.active, job=_good()), "x"), UnknownJob),
    (
        "fail unknown, dead",
        lambda w: w.bus.fail(_with(w.active, job=_good()), "x", retryable=False),
        UnknownJob,
    ),
    ("extend unknown", lambda w: w.bus.extend(_with(w.active, job=_good()), 1000), UnknownJob),
    ("release unknown", lambda w: w.bus.release(_with(w.active, job=_good())), UnknownJob),
    ("retry_dead unknown", lambda w: w.bus.retry_dead(_good()), UnknownJob),
    ("inspect unknown", lambda w: w.bus.inspect(_good()), UnknownJob),
]

PAYLOAD_CASES: list[tuple[str, Call, type[EchoMQError]]] = [
    (
        "payload 64 KiB + 1",
        lambda w: w.bus.enqueue(_good(), lane="A", payload=b"x" * (KIB_64 + 1)),
        PayloadTooLarge,
    ),
    ("payload 1 MiB", lambda w: w.bus.enqueue(_good(), lane="A", payload=bytes(1 << 20)), PayloadTooLarge),
    ("payload str", lambda w: w.bus.enqueue(_good(), lane="A", payload="text"), InvalidPayload),
    ("payload None", lambda w: w.bus.enqueue(_good(), lane="A", payload=None), InvalidPayload),
    ("payload int", lambda w: w.bus.enqueue(_good(), lane="A", payload=7), InvalidPayload),
    ("payload list", lambda w: w.bus.enqueue(_good(), lane="A", payload=[b"a"]), InvalidPayload),
    ("payload dict", lambda w: w.bus.enqueue(_good(), lane="A", payload={"a": 1}), InvalidPayload),
    ("result 64 KiB + 1", lambda w: w.bus.complete(w.active, b"x" * (KIB_64 + 1)), PayloadTooLarge),
    ("result str", lambda w: w.bus.complete(w.active, "done"), InvalidPayload),
    ("result None", lambda w: w.bus.complete(w.active, None), InvalidPayload),
    ("error bytes", lambda w: w.bus.fail(w.active, b"boom"), InvalidPayload),
    ("error None", lambda w: w.bus.fail(w.active, None), InvalidPayload),
]


def _token_cases() -> list[tuple[str, Call, type[EchoMQError]]]:
    cases: list[tuple[str, Call, type[EchoMQError]]] = []
    for why, bad in [
        ("str", "1"),
        ("float", 1.0),
        ("bool", True),
        ("zero", 0),
        ("negative", -1),
        ("None", None),
    ]:
        cases += [
            (
                f"complete token {why}",
                lambda w, b=bad: w.bus.complete(_with(w.active, token=b)),
                InvalidToken,
            ),
            (f"fail token {why}", lambda w, b=bad: w.bus.fail(_with(w.active, token=b), "x"), InvalidToken),
            (
                f"extend token {why}",
                lambda w, b=bad: w.bus.extend(_with(w.active, token=b), 1000),
                InvalidToken,
            ),
            (f"release token {why}", lambda w, b=bad: w.bus.release(_with(w.active, token=b)), InvalidToken),
        ]
    for why, bad in [("job id", "JOB"), ("tuple", ("JOB", "A", 1)), ("dict", {"token": 1}), ("None", None)]:
        cases += [
            (f"complete non-claim {why}", lambda w, b=bad: w.bus.complete(b), InvalidToken),
            (f"release non-claim {why}", lambda w, b=bad: w.bus.release(b), InvalidToken),
        ]
    return cases


def _enqueue(w: World, **options: Any) -> Awaitable[Admission]:
    return w.bus.enqueue(_good(), lane="A", payload=b"", **options)


OPTION_CASES: list[tuple[str, Call, type[EchoMQError]]] = [
    ("max_attempts 0", lambda w: _enqueue(w, max_attempts=0), InvalidOption),
    ("max_attempts 1001", lambda w: _enqueue(w, max_attempts=1001), InvalidOption),
    ("max_attempts True", lambda w: _enqueue(w, max_attempts=True), InvalidOption),
    ("max_attempts float", lambda w: _enqueue(w, max_attempts=3.0), InvalidOption),
    ("max_attempts str", lambda w: _enqueue(w, max_attempts="3"), InvalidOption),
    ("delay negative", lambda w: _enqueue(w, delay_ms=-1), InvalidOption),
    ("delay over a year", lambda w: _enqueue(w, delay_ms=366 * 24 * 3600 * 1000), InvalidOption),
    ("delay bool", lambda w: _enqueue(w, delay_ms=False), InvalidOption),
    ("priority bool", lambda w: _enqueue(w, priority=True), InvalidOption),
    ("priority too high", lambda w: _enqueue(w, priority=1_000_001), InvalidOption),
    ("priority too low", lambda w: _enqueue(w, priority=-1_000_001), InvalidOption),
    ("priority float", lambda w: _enqueue(w, priority=0.5), InvalidOption),
    ("claim count 0", lambda w: w.bus.claim(count=0), InvalidOption),
    ("claim count 1001", lambda w: w.bus.claim(count=1001), InvalidOption),
    ("claim count True", lambda w: w.bus.claim(count=True), InvalidOption),
    ("claim count negative", lambda w: w.bus.claim(count=-1), InvalidOption),
    ("claim lease 0", lambda w: w.bus.claim(lease_ms=0), InvalidOption),
    ("claim lease float", lambda w: w.bus.claim(lease_ms=1.5), InvalidOption),
    ("claim lease over a day", lambda w: w.bus.claim(lease_ms=24 * 3600 * 1000 + 1), InvalidOption),
    ("claim owner int", lambda w: w.bus.claim(owner=7), InvalidOption),
    ("claim owner too long", lambda w: w.bus.claim(owner="w" * 201), InvalidOption),
    ("extend lease 0", lambda w: w.bus.extend(w.active, 0), InvalidOption),
    ("extend lease negative", lambda w: w.bus.extend(w.active, -5), InvalidOption),
    ("extend lease bool", lambda w: w.bus.extend(w.active, True), InvalidOption),
    ("extend lease str", lambda w: w.bus.extend(w.active, "1000"), InvalidOption),
    ("fail delay negative", lambda w: w.bus.fail(w.active, "x", delay_ms=-1), InvalidOption),
    ("fail delay float", lambda w: w.bus.fail(w.active, "x", delay_ms=0.5), InvalidOption),
    ("fail retryable str", lambda w: w.bus.fail(w.active, "x", retryable="no"), InvalidOption),
    ("fail retryable int", lambda w: w.bus.fail(w.active, "x", retryable=0), InvalidOption),
    ("sweep limit 0", lambda w: w.bus.sweep(limit=0), InvalidOption),
    ("sweep lock negative", lambda w: w.bus.sweep(lock_ms=-1), InvalidOption),
    ("stats lanes negative", lambda w: w.bus.stats(lanes=-1), InvalidOption),
    ("dead_jobs limit 0", lambda w: w.bus.dead_jobs(limit=0), InvalidOption),
    ("wait timeout 0", lambda w: w.bus.wait_for_work(0), InvalidOption),
    ("wait timeout bool", lambda w: w.bus.wait_for_work(True), InvalidOption),
    ("enqueue_many one bad of many", lambda w: w.bus.enqueue_many(
        [NewJob(_good(), "A", b""), NewJob(_good(), "A", b"", max_attempts=0), NewJob(_good(), "A", b"")]
    ), InvalidOption),
    ("enqueue_many one oversized of many", lambda w: w.bus.enqueue_many(
        [NewJob(_good(), "A", b""), NewJob(_good(), "B", b"x" * (KIB_64 + 1))]
    ), PayloadTooLarge),
]  # fmt: skip

LONE_SURROGATE = "w\ud800"  # a str Python holds that no UTF-8 byte string stands for

TEXT_CASES: list[tuple[str, Call, type[EchoMQError]]] = [
    ("claim owner lone surrogate", lambda w: w.bus.claim(owner=LONE_SURROGATE), InvalidOption),
    ("claim_batch owner lone surrogate", lambda w: w.bus.claim_batch(owner=LONE_SURROGATE), InvalidOption),
    ("claim request lone surrogate", lambda w: w.bus.claim(request=LONE_SURROGATE), InvalidOption),
    ("fail error lone surrogate", lambda w: w.bus.fail(w.active, LONE_SURROGATE), InvalidPayload),
    (
        "fail error lone surrogate, dead",
        lambda w: w.bus.fail(w.active, "boom " + LONE_SURROGATE, retryable=False),
        InvalidPayload,
    ),
    ("enqueue job lone surrogate", lambda w: w.bus.enqueue(LONE_SURROGATE, lane="A", payload=b""), InvalidId),
    (
        "enqueue lane lone surrogate",
        lambda w: w.bus.enqueue(_good(), lane=LONE_SURROGATE, payload=b""),
        InvalidLane,
    ),
    (
        "enqueue_many lane lone surrogate",
        lambda w: w.bus.enqueue_many([NewJob(_good(), LONE_SURROGATE, b"")]),
        InvalidLane,
    ),
    ("inspect lone surrogate", lambda w: w.bus.inspect(LONE_SURROGATE), InvalidId),
    ("retry_dead lone surrogate", lambda w: w.bus.retry_dead(LONE_SURROGATE), InvalidId),
    (
        "complete claim request lone surrogate",
        lambda w: w.bus.complete(_with(w.active, request=LONE_SURROGATE)),
        InvalidOption,
    ),
    (
        "fail claim request lone surrogate",
        lambda w: w.bus.fail(_with(w.active, request=LONE_SURROGATE), "x"),
        InvalidOption,
    ),
    (
        "extend claim request lone surrogate",
        lambda w: w.bus.extend(_with(w.active, request=LONE_SURROGATE), 1000),
        InvalidOption,
    ),
    (
        "release claim request lone surrogate",
        lambda w: w.bus.release(_with(w.active, request=LONE_SURROGATE)),
        InvalidOption,
    ),
    (
        "complete claim lane lone surrogate",
        lambda w: w.bus.complete(_with(w.active, lane=LONE_SURROGATE)),
        InvalidLane,
    ),
    (
        "complete claim job lone surrogate",
        lambda w: w.bus.complete(_with(w.active, job=LONE_SURROGATE)),
        InvalidId,
    ),
]

CASES = (
    TEXT_CASES + _id_cases() + _lane_cases() + UNKNOWN_CASES + PAYLOAD_CASES + _token_cases() + OPTION_CASES
)


@pytest.mark.parametrize(("why", "call", "error"), CASES, ids=[why for why, _, _ in CASES])
async def test_bad_input_raises_its_typed_error_and_changes_nothing(world, why, call, error):
    """Each bad call raises its own echomq.errors type, and every key of the bus is unchanged."""
    before = world.probe.snapshot()
    with pytest.raises(error) as caught:
        await call(world)
    assert isinstance(caught.value, EchoMQError)
    if error is not UnknownJob:
        assert isinstance(caught.value, InvalidInput | ValueError)
    assert str(caught.value)
    world.probe.check()
    world.probe.assert_unchanged(before)


async def test_unknown_job_is_a_lookup_error_not_an_input_error(world):
    """UnknownJob reads as a LookupError (the id was fine, the job is not there), not InvalidInput."""
    with pytest.raises(LookupError) as caught:
        await world.bus.inspect(_good())
    assert not isinstance(caught.value, InvalidInput)


async def test_a_payload_of_exactly_64_kib_is_admitted(world):
    """The size limit is inclusive: a payload of exactly 64 KiB is admitted and delivered whole."""
    job = _good()
    payload = bytes(range(256)) * (KIB_64 // 256)
    assert len(payload) == KIB_64
    assert await world.bus.enqueue(job, lane="Z", payload=payload) is Admission.ADMITTED
    assert world.probe.check()[job] == "queued"
    claims = await world.bus.claim(count=10)
    [mine] = [c for c in claims if c.job == job]
    assert mine.payload == payload


async def test_a_result_of_exactly_64_kib_is_stored(world):
    """A result of exactly the size limit completes the job."""
    assert (await world.bus.complete(world.active, b"r" * KIB_64)).value == "done"
    assert world.probe.row(world.active.job)["result"] == b"r" * KIB_64
    world.probe.check()


async def test_the_size_limit_follows_the_settings(redis_server, sync_redis, tag):
    """A bus with a smaller max_payload refuses one byte over it and admits it exactly."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(max_payload=10))
    probe = Probe(sync_redis, bus.keys)
    probe.watch(bus)
    try:
        with pytest.raises(PayloadTooLarge):
            await bus.enqueue(_good(), lane="A", payload=b"x" * 11)
        assert probe.snapshot() == {}
        assert await bus.enqueue(_good(), lane="A", payload=b"x" * 10) is Admission.ADMITTED
        probe.check()
    finally:
        await bus.aclose()


async def test_a_payload_and_a_result_at_the_largest_max_payload_round_trip(redis_server, sync_redis, tag):
    """The largest size a bus may allow (its row is written by one HSET whose arguments Lua unpacks)
    is admitted, claimed whole and completed with a result as large."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(max_payload=MAX_PAYLOAD))
    payload = bytes(range(256)) * (MAX_PAYLOAD // 256)
    try:
        job = _good()
        assert await bus.enqueue(job, lane="A", payload=payload) is Admission.ADMITTED
        claims = await bus.claim(1, 30_000)
        assert [(c.job, c.payload) for c in claims] == [(job, payload)]
        assert (await bus.complete(claims[0], payload[::-1])).value == "done"
        assert (await bus.inspect(job)).result == payload[::-1]
    finally:
        await bus.aclose()


@pytest.mark.parametrize("tag", ["", "{cm}", "a b", "x" * 33, None, "t\ud800"])
def test_a_bus_with_a_bad_tag_cannot_be_built(tag):
    """Bus(tag=...) raises InvalidTag before any client call is made."""
    with pytest.raises(InvalidTag):
        Bus(redis=None, tag=tag)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "settings",
    [
        {"max_payload": 0},
        {"max_payload": MAX_PAYLOAD + 1},
        {"wake_cap": 0},
        {"result_ttl_ms": -1},
        {"dedup_window_ms": -1},
        {"backoff_base_ms": 0},
        {"max_payload": True},
    ],
)
def test_bad_settings_are_refused(settings):
    """Settings outside their ranges raise InvalidOption at construction."""
    with pytest.raises(InvalidOption):
        Settings(**settings)


@pytest.mark.parametrize("hours", [-7, 7, -24 * 365 * 50])
async def test_an_id_minted_far_from_now_is_refused_so_no_client_pins_a_tombstone_hash(
    redis_server, sync_redis, tag, hours
):
    """An id whose mint time is more than the dedup window or 6 h (the longer) from the producer's
    clock, before or after, is refused with InvalidId and nothing is sent: the tombstones of ids minted
    in the same ~65 s share one hash, so ids with one made-up timestamp taken from clients would keep
    that hash growing. Within the span, an old id is admitted."""
    bus = Bus.from_url(redis_server.url, tag=tag, settings=Settings(dedup_window_ms=3_600_000))
    probe = Probe(sync_redis, bus.keys)
    probe.watch(bus)
    now_ms = ids.timestamp_ms(ids.mint("JOB"))
    at = ids.from_body("JOB", (now_ms + hours * 3_600_000).to_bytes(6, "big") + bytes(8))
    fine = ids.from_body("JOB", (now_ms - 5 * 3_600_000).to_bytes(6, "big") + bytes(8))
    try:
        with pytest.raises(InvalidId, match="mint a new one"):
            await bus.enqueue(at, lane="A", payload=b"x")
        with pytest.raises(InvalidId):
            await bus.enqueue_many([NewJob(_good(), "A", b"x"), NewJob(at, "A", b"x")])
        assert probe.snapshot() == {}
        assert await bus.enqueue(fine, lane="A", payload=b"x") is Admission.ADMITTED
        probe.check()
    finally:
        await bus.aclose()

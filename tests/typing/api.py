"""Only type-checked (``mypy --strict tests/typing``), never run: the README's examples must type-check."""

from __future__ import annotations

from echomq import (
    Admission,
    Bus,
    Claim,
    Completion,
    DeadRetry,
    EffectRefused,
    Effects,
    Finish,
    InvalidEffect,
    InvalidInput,
    Job,
    JobInfo,
    NewJob,
    Permanent,
    Rate,
    Schedule,
    Scheduler,
    Stats,
    SweepReport,
    SyncBus,
    Worker,
    ids,
)
from echomq.tasks import Tasks


async def readme_use() -> None:
    bus = Bus.from_url("redis://127.0.0.1:6379/0", tag="cm")
    job = ids.mint("JOB")
    assert await bus.enqueue(job, lane="PLR-alice", payload=b"hello") is Admission.ADMITTED
    assert await bus.enqueue(job, lane="PLR-alice", payload=b"hello") is Admission.DUPLICATE
    [claim] = await bus.claim(count=1, lease_ms=10_000)
    assert await bus.complete(claim, result=b"ok") is Finish.DONE
    assert await bus.complete(claim, result=b"ok") is Finish.DONE  # a retry: this claim finished it
    await bus.aclose()


async def public_surface(bus: Bus) -> None:
    admissions: list[Admission] = await bus.enqueue_many([NewJob(ids.mint("JOB"), "lane", b"")])
    claims: list[Claim] = await bus.claim(count=10)
    for claim in claims:
        await bus.fail(claim, "boom", retryable=True)
    info: JobInfo = await bus.inspect(ids.mint("JOB"))
    report: SweepReport = await bus.sweep(lock_ms=0)
    stats: Stats = await bus.stats()
    body: bytes = ids.body(ids.rebrand(info.job, "GES"))
    retried: DeadRetry = await bus.retry_all_dead(batch=500)
    moved: tuple[str, ...] = retried.moved
    del admissions, report, stats, body, moved


def readme_sync_producer(job: str, player: str, body: bytes) -> tuple[dict[str, str], int]:
    """The README's Flask view, without Flask."""
    with SyncBus.from_url("redis://127.0.0.1:6379/0", tag="cm", max_connections=32) as bus:
        try:
            admission = bus.enqueue(job or ids.mint("JOB"), lane=f"PLR-{player}", payload=body)
        except InvalidInput as exc:
            return {"error": str(exc)}, 400
        if admission is Admission.CONFLICT:
            return {"error": "idempotency key reused"}, 409
        many: list[Admission] = bus.enqueue_many([NewJob(ids.mint("JOB"), "lane", b"...")])
        info: JobInfo = bus.inspect(job)
        stats: Stats = bus.stats()
        del many, info, stats
    return {"job": job}, 202


# The README's worker example.


async def handle(job: Job) -> bytes:
    if not job.payload:
        raise Permanent("empty payload")
    if job.revoked.is_set():
        return b""
    return job.payload.upper()


async def serve() -> None:
    bus = Bus.from_url("redis://127.0.0.1:6379/0", tag="cm")
    worker = Worker(bus, handle, concurrency=50, lease_ms=30_000)
    await worker.run(handle_signals=True)
    await bus.aclose()


async def readme_periodic() -> None:
    async with Bus.from_url("redis://127.0.0.1:6379/0", tag="cm") as bus:
        await Scheduler(
            bus,
            [
                Schedule(name="nightly", cron="30 2 * * *", lane="reports", payload=b"nightly"),
                Schedule(name="heartbeat", every_ms=30_000, lane="health", payload=b"ping"),
            ],
        ).run()


async def readme_tasks_results_control(bus: Bus, other_job: str, running_job: str) -> None:
    tasks = Tasks(lane="mail")

    @tasks.task("send_email")
    async def send_email(to: str, subject: str) -> dict[str, str]:
        return {"sent": to}

    job = await send_email.enqueue(bus, "ada@example.com", subject="hi")
    worker = Worker(bus, tasks.handler, concurrency=20)
    assert worker.concurrency == 20
    print(await send_email.result(bus, job, timeout=30))
    await bus.cancel(other_job, "customer left")
    await bus.revoke(running_job, "stop")
    await bus.pause("tenant-7")
    await bus.resume("tenant-7")
    await bus.set_lane_cap("tenant-42", 2)
    await bus.set_rate_limit(Rate(100, 1000))
    await bus.set_events(100_000)
    async for event in bus.events(since="$", follow=True):
        print(event.time_ms, event.kind, event.job)


async def readme_effects(bus: Bus, claim: Claim) -> None:
    fx = Effects().incrby("shop:{cm}:paid", 1).hset("shop:{cm}:order:7", "state", "paid")
    fx.set("k", b"v", px=1000).delete("k").pexpire("k", 5).hdel("h", "f").hincrby("h", "f", 1)
    fx.zadd("z", 1.5, "m").zincrby("z", 2, "m").zrem("z", "m").sadd("s", "a").srem("s", "a")
    fx.rpush("l", 1).lpush("l", "x").xadd("x", {"k": "v"}, maxlen=100, approximate=False)
    try:
        outcome: Finish = await bus.complete(claim, b"receipt", effects=fx)
    except (EffectRefused, InvalidEffect):
        return
    assert outcome in (Finish.DONE, Finish.STALE)


async def effects_handler(job: Job) -> Completion:
    return Completion(b"receipt", Effects().hset(f"shop:{{cm}}:order:{job.id}", "state", "paid"))


def effects_worker(bus: Bus) -> Worker:
    return Worker(bus, effects_handler)

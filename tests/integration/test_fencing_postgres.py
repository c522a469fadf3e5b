"""The fencing recipe (docs/site/recipes/fencing.md) on a real PostgreSQL started by this test: the claim's
attempts token is the fencing token of the job's row in the database, so a stale worker's write is
refused by PostgreSQL and its complete by EchoMQ, and a retry of the same claim is idempotent.

The recipe's code is here, as the page shows it: ``SHIP`` and :func:`ship`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from echomq import Bus, Finish, Job, Worker, ids
from echomq.jobs import Claim
from tests.support.postgres import PostgresProcess, find_bindir
from tests.support.workers import eventually, running

psycopg = pytest.importorskip("psycopg", reason="psycopg is in the test extra: pip install -e '.[test]'")

SCHEMA = """
CREATE TABLE orders (id text PRIMARY KEY, status text NOT NULL DEFAULT 'new');
CREATE TABLE shipments (
    job_id   text PRIMARY KEY,         -- the fenced row is the job's own
    order_id text NOT NULL REFERENCES orders (id),
    label    text NOT NULL,
    fence    bigint NOT NULL           -- the attempts token of the claim that wrote it
);
"""

# --- the recipe -------------------------------------------------------------------------------------

SHIP = """
INSERT INTO shipments (job_id, order_id, label, fence)
VALUES (%(job)s, %(order)s, %(label)s, %(token)s)
ON CONFLICT (job_id) DO UPDATE SET label = excluded.label, fence = excluded.fence
WHERE shipments.fence < excluded.fence
"""


class StaleClaim(Exception):
    """A newer claim of this job wrote first: this run lost the job and must not write."""


async def ship(conn: psycopg.AsyncConnection, job: Job) -> bytes:
    """Write the job's shipment, fenced by its attempts token, and its order's status, in one
    transaction; raise StaleClaim (nothing written) if a newer claim of the job wrote already."""
    order = job.payload.decode()
    label = f"label {order} by claim {job.attempt}"
    async with conn.transaction():
        written = await conn.execute(
            SHIP, {"job": job.id, "order": order, "label": label, "token": job.attempt}
        )
        if written.rowcount == 0:  # the row holds this token (a retry of this claim) or a newer one
            cursor = await conn.execute("SELECT fence FROM shipments WHERE job_id = %s", (job.id,))
            row = await cursor.fetchone()
            assert row is not None
            if row[0] != job.attempt:
                raise StaleClaim(f"job {job.id}: fence {row[0]} is newer than this claim's {job.attempt}")
        await conn.execute("UPDATE orders SET status = 'shipped' WHERE id = %s", (order,))
    return label.encode()


# --- the server and the tests -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresProcess]:
    """A PostgreSQL server of this module's own (never the machine's), or a skip that says why not."""
    bindir, why = find_bindir()
    if bindir is None:
        pytest.skip(why)
    with PostgresProcess(bindir) as server:
        yield server


@pytest.fixture
async def db(postgres: PostgresProcess) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection to a fresh copy of the schema."""
    async with await psycopg.AsyncConnection.connect(postgres.dsn, autocommit=True) as conn:
        await conn.execute("DROP TABLE IF EXISTS shipments, orders")
        await conn.execute(SCHEMA)
        yield conn


async def _order_job(bus: Bus, db: psycopg.AsyncConnection, order: str) -> str:
    await db.execute("INSERT INTO orders (id) VALUES (%s)", (order,))
    job = ids.mint("JOB")
    await bus.enqueue(job, lane="orders", payload=order.encode(), max_attempts=5)
    return job


async def _rows(db: psycopg.AsyncConnection) -> list[tuple[str, str, int]]:
    cursor = await db.execute("SELECT order_id, label, fence FROM shipments ORDER BY order_id")
    return [tuple(row) for row in await cursor.fetchall()]  # type: ignore[misc]


async def _reclaimed(bus: Bus, stale: Claim) -> Claim:
    """Sweep until ``stale``'s lease ran out and the job is back, then claim it again (a newer token)."""

    async def swept() -> bool:
        return (await bus.sweep()).reclaimed == 1

    await eventually(swept, 10, "the paused worker's lease ran out")
    [newer] = await bus.claim(lease_ms=30_000)
    assert (newer.job, newer.token) == (stale.job, stale.token + 1)
    return newer


async def test_a_stale_workers_write_is_refused_by_postgres_and_its_complete_by_echomq(bus, db):
    """A worker paused past its lease while another re-claims the job: the newer claim writes and
    completes; the paused one, resumed, is refused by PostgreSQL (its transaction rolled back whole) and
    its complete is STALE."""
    job = await _order_job(bus, db, "order-1")
    [paused] = await bus.claim(lease_ms=300)  # its handler stalls here, past the lease
    newer = await _reclaimed(bus, paused)

    assert await ship(db, Job(newer)) == b"label order-1 by claim 2"
    assert await bus.complete(newer, b"shipped") is Finish.DONE

    await db.execute("UPDATE orders SET status = 'returned' WHERE id = 'order-1'")  # a later change
    with pytest.raises(StaleClaim, match="fence 2 is newer than this claim's 1"):
        await ship(db, Job(paused))
    assert await bus.complete(paused, b"late") is Finish.STALE
    assert await _rows(db) == [("order-1", "label order-1 by claim 2", 2)]
    cursor = await db.execute("SELECT status FROM orders WHERE id = 'order-1'")
    assert await cursor.fetchone() == ("returned",)  # the stale run's transaction wrote nothing
    info = await bus.inspect(job)
    assert (info.state.value, info.result) == ("done", b"shipped")


async def test_a_retry_of_the_same_claim_is_idempotent(bus, db):
    """The same claim writing again (its first commit's reply lost, or its handler run twice): the row
    keeps that claim's write, nothing is refused, and its complete's retry is DONE."""
    await _order_job(bus, db, "order-2")
    [claim] = await bus.claim(lease_ms=30_000)
    first = await ship(db, Job(claim))
    assert await ship(db, Job(claim)) == first
    assert await _rows(db) == [("order-2", "label order-2 by claim 1", 1)]
    assert await bus.complete(claim, first) is Finish.DONE
    assert await bus.complete(claim, first) is Finish.DONE


async def test_an_older_claim_that_wrote_first_is_overwritten_and_cannot_complete(bus, db):
    """Fencing orders the writes: a stale claim may write before the newer one does (it did not know yet);
    the newer write then replaces it, and once it did no older claim can write or complete."""
    await _order_job(bus, db, "order-3")
    [older] = await bus.claim(lease_ms=300)
    newer = await _reclaimed(bus, older)
    await ship(db, Job(older))  # lands first: the database has seen no newer claim yet
    assert await _rows(db) == [("order-3", "label order-3 by claim 1", 1)]
    await ship(db, Job(newer))
    assert await _rows(db) == [("order-3", "label order-3 by claim 2", 2)]
    with pytest.raises(StaleClaim):
        await ship(db, Job(older))
    assert await bus.complete(older) is Finish.STALE
    assert await bus.complete(newer) is Finish.DONE


async def test_a_worker_runs_the_recipe_for_every_job(bus, db, postgres):
    """Through a Worker: every order shipped once, fenced by its first claim's token, every job done."""
    orders = [f"order-w{i}" for i in range(12)]
    jobs = [await _order_job(bus, db, order) for order in orders]
    async with await psycopg.AsyncConnection.connect(postgres.dsn) as handler_conn:

        async def handler(job: Job) -> bytes:
            return await ship(handler_conn, job)

        async with running(Worker(bus, handler, concurrency=1)) as worker:
            await eventually(lambda: worker.counts.completed == len(jobs), 30, "every order shipped")
    assert await _rows(db) == sorted((order, f"label {order} by claim 1", 1) for order in orders)
    cursor = await db.execute("SELECT count(*) FROM orders WHERE status = 'shipped'")
    assert await cursor.fetchone() == (len(orders),)

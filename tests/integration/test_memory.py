"""Redis memory per job: byte budgets of a queued job and of a finished job's tombstone, on a real server.

A byte count is not a timing: ``used_memory`` after minus before, over many jobs, is the same from run
to run within a few bytes. The figures come from bench.memory (``python -m bench.memory`` prints them for
100,000 jobs); here 30,000 jobs keep the test quick (Redis sizes its hash tables in powers of two, so
between 2**15 and 2**16 keys the table's share per key is about what it is at 100,000). Each test also
checks the encoding Redis chose (OBJECT ENCODING), which is the reason a budget holds or not: a row
stays a listpack only while every value is at most 64 bytes, a sorted set of over 128 members is a
skiplist.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from bench import memory
from echomq.testing.server import RedisProcess

JOBS = 30_000
TOMBSTONES = 20_000
COMPACT = ("listpack", "ziplist")  # Redis 7's compact encoding, and Redis 6.2's


@pytest.fixture(scope="module")
def server() -> Iterator[RedisProcess]:
    """A server of its own: no other test's keys move used_memory while a figure is taken."""
    with RedisProcess(appendonly=False) as process:
        yield process


@pytest.fixture(scope="module")
def client(server: RedisProcess) -> Iterator[redis.Redis]:
    with redis.Redis.from_url(server.url) as connection:
        memory.warm_up(connection, server.url)  # the scripts loaded: what follows is the jobs' memory
        yield connection


def _budget_applies(client: redis.Redis) -> bool:
    """The budgets are Redis 7's (listpack); 6.2's ziplist entries cost a few bytes more each."""
    return int(str(client.info("server")["redis_version"]).split(".")[0]) >= 7


@pytest.mark.parametrize(("payload_bytes", "budget"), [(100, 450), (16, 300)])
@pytest.mark.parametrize("lanes", [1000, 1])
def test_a_queued_job_fits_its_byte_budget(server, client, payload_bytes, budget, lanes):
    """A queued job costs at most 450 bytes with a 100-byte payload and 300 with a 16-byte one, over 1,000
    lanes (each a listpack) and over one lane (a skiplist): its row is a compact listpack."""
    sample = memory.sample_queued(client, server.url, JOBS, lanes, payload_bytes)
    assert sample.encodings["row"] in COMPACT, sample
    assert sample.encodings["lane"] == ("skiplist" if lanes == 1 else sample.encodings["row"]), sample
    if _budget_applies(client):
        assert sample.bytes_per_job <= budget, sample


def test_a_finished_job_s_tombstone_fits_its_byte_budget(server, client):
    """Once its result ttl passed, a finished job costs at most 120 bytes: no row, no key and no expiry
    of its own, one field of the hash shared by the ids minted in the same ~65 s."""
    sample = memory.sample_tombstones(client, server.url, TOMBSTONES)
    assert sample.encodings["tombstones"] in ("hashtable", *COMPACT), sample
    if _budget_applies(client):
        assert sample.bytes_per_job <= 120, sample

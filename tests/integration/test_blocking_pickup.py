"""The blocking pickup: an idle worker stays within its command budget, counting the commands its scripts
run, and an enqueue wakes it at once, its claim sent ahead behind the BLPOP.

Each test runs its worker on a redis-server of its own, so every command the server sees comes from that
worker or from the test itself. Two views are compared with the budget:

* ``INFO commandstats`` counts every command the server ran, including those a Lua script runs inside
  itself (the test's own INFO calls are left out);
* ``MONITOR`` lists each command with the client that sent it, scripts' inner commands marked ``lua``.

An idle worker's cost comes in blocks of :data:`~echomq.worker.fetcher.IDLE_CAP_S` (600 s): a test cannot
wait for many of those, so one test shortens the cap of an in-process worker to count what one block
costs, and scales that to the default cap; another runs the worker as shipped and sees nothing at all.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
import redis

from echomq import Bus, Worker, ids
from echomq.testing.monitor import CommandMonitor
from echomq.worker.fetcher import IDLE_CAP_S
from echomq.worker.runner import IDLE_COMMANDS_PER_MIN
from tests.support.workers import cli, eventually, running, state_is, stop_process

SHORT_CAP_S = 1.0


def _calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    delta = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    delta.pop("info", None)  # the test's own INFO calls
    return delta


def _blocked_worker(client: redis.Redis) -> dict | None:
    """The worker's connection blocked in BLPOP, if it is blocked right now."""
    for entry in client.client_list():
        if entry.get("cmd") == "blpop" and "b" in entry.get("flags", ""):
            return entry
    return None


def _blocks(lines: list[str]) -> list[list[str]]:
    """MONITOR lines cut at each BLPOP: every whole block with what followed it up to the next BLPOP."""
    starts = [i for i, line in enumerate(lines) if '"BLPOP"' in line]
    return [lines[a:b] for a, b in itertools.pairwise(starts)]


async def noop(job) -> None:
    """Finishes at once."""


@pytest.mark.slow
async def test_an_idle_worker_costs_at_most_its_budget_counting_the_commands_its_scripts_run(fresh_server):
    """Each block of an idle worker costs one BLPOP, the claim behind it and one sweep: 17 commands in all
    counting the scripts' own, the same whatever the cap; at the default cap that is within the budget."""
    client = redis.Redis(port=fresh_server.port)
    async with Bus.from_url(fresh_server.url, tag="idle") as bus:
        worker = Worker(bus, noop)
        worker.fetcher.idle_cap_s = SHORT_CAP_S
        async with running(worker):
            await eventually(lambda: _blocked_worker(client) is not None, 30, "the worker blocks")
            monitor = CommandMonitor(fresh_server.port)
            before = _calls(client)
            await asyncio.sleep(6 * SHORT_CAP_S)
            after = _calls(client)
            lines = monitor.close(scripts=True)
    client.close()
    delta = _delta(before, after)
    assert delta.get("blpop", 0) >= 4, f"blocks of {SHORT_CAP_S} s each: {delta}"
    top_level = {line.split('"')[1] for line in lines if "[0 lua]" not in line and '"INFO"' not in line}
    assert top_level <= {"BLPOP", "EVALSHA"}, f"commands other than scripts and BLPOP: {top_level}"
    per_block = sum(delta.values()) / delta["blpop"]
    blocks = _blocks([line for line in lines if '"INFO"' not in line])
    assert blocks, "no whole block seen"
    assert max(len(block) for block in blocks) <= 17, "\n".join(blocks[0])
    assert [sum('"EVALSHA"' in line for line in block) for block in blocks] == [2] * len(blocks)
    per_minute = max(per_block, *(len(block) for block in blocks)) * 60 / IDLE_CAP_S
    assert per_minute <= IDLE_COMMANDS_PER_MIN, f"{per_block} commands a block: {per_minute} a minute"


@pytest.mark.slow
async def test_an_idle_worker_as_shipped_blocks_for_its_whole_cap_and_sends_nothing_meanwhile(fresh_server):
    """A worker process with the default settings blocks for the idle cap once it has swept and claimed,
    and over 20 s the server runs no command at all, in scripts or not."""
    client = redis.Redis(port=fresh_server.port)
    monitor = CommandMonitor(fresh_server.port)
    worker = cli(fresh_server.url, "--tag", "idle", "worker", "tests.faults.handlers:noop")
    try:
        await eventually(
            lambda: _blocked_worker(client) is not None, 30, "the worker blocks on the wake list"
        )
        time.sleep(0.5)
        before = _calls(client)
        time.sleep(20)
        after = _calls(client)
        assert worker.poll() is None, "the worker must still be running"
    finally:
        lines = monitor.close()
        worker.terminate()
        worker.wait(20)
        stop_process(worker)
        client.close()
    assert _delta(before, after) == {}
    [block] = [line for line in lines if '"BLPOP"' in line]
    assert float(block.split('"')[-2]) > IDLE_CAP_S - 5, block


@pytest.mark.slow
async def test_enqueue_wakes_an_idle_worker_at_once(fresh_server):
    """A job enqueued while a worker process is blocked for its 600 s cap is done within seconds."""
    client = redis.Redis(port=fresh_server.port)
    worker = cli(fresh_server.url, "--tag", "wake", "worker", "tests.faults.handlers:noop")
    try:
        await eventually(
            lambda: _blocked_worker(client) is not None, 30, "the worker blocks on the wake list"
        )
        async with Bus.from_url(fresh_server.url, tag="wake") as bus:
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"wake up")
            await eventually(lambda: state_is(bus, job, "done"), 10, "done long before the cap")
    finally:
        worker.terminate()
        worker.wait(20)
        stop_process(worker)
        client.close()


async def test_the_claim_runs_on_the_blocked_connection_as_the_token_arrives(fresh_server):
    """The wake token goes straight to a claim: Redis runs the claim the worker sent behind its BLPOP, on
    the same connection, right after the enqueue; the worker sends nothing between the two."""
    client = redis.Redis(port=fresh_server.port)
    async with Bus.from_url(fresh_server.url, tag="pipe") as bus:
        worker = Worker(bus, noop)
        async with running(worker):
            warm = ids.mint("JOB")  # loads the enqueue script, so the enqueue below is one EVALSHA
            await bus.enqueue(warm, lane="L", payload=b"x")
            await eventually(lambda: state_is(bus, warm, "done"), 10, "done")
            await asyncio.sleep(0.2)
            await eventually(lambda: _blocked_worker(client) is not None, 30, "the worker blocks")
            blocked = _blocked_worker(client)
            assert blocked is not None
            monitor = CommandMonitor(fresh_server.port)
            await asyncio.sleep(0.2)
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"x")
            await eventually(lambda: state_is(bus, job, "done"), 10, "done")
            lines = monitor.close()
    client.close()
    address = blocked["addr"]
    enqueue = next(i for i, line in enumerate(lines) if f'"{job}"' in line)  # the enqueue names the job
    after = lines[enqueue + 1]
    assert f"[0 {address}]" in after, "\n".join(lines[enqueue : enqueue + 3])
    assert '"EVALSHA"' in after, after


async def test_a_claim_the_server_cannot_run_for_want_of_its_script_is_sent_again_at_once(fresh_server):
    """The server's script cache is flushed while the worker blocks: the token's claim, sent ahead by its
    hash, is refused (NOSCRIPT, so it did not run); the worker claims at once, loading the script."""
    client = redis.Redis(port=fresh_server.port)
    async with Bus.from_url(fresh_server.url, tag="noscript") as bus:
        worker = Worker(bus, noop)
        async with running(worker):
            await eventually(lambda: _blocked_worker(client) is not None, 30, "the worker blocks")
            client.script_flush()
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"x")
            await eventually(lambda: worker.processed == 1, 10, "done long before the cap")
    client.close()


async def test_a_worker_whose_blocked_connection_is_cut_blocks_again_and_still_wakes(fresh_server):
    """The blocked connection is killed from the server's side: the block fails as Redis being
    unreachable, its claim (which may have run) is asked again by request id, and the worker blocks on a
    new connection, where the next enqueue wakes it."""
    client = redis.Redis(port=fresh_server.port)
    async with Bus.from_url(fresh_server.url, tag="cut") as bus:
        worker = Worker(bus, noop)
        async with running(worker):
            await eventually(lambda: _blocked_worker(client) is not None, 30, "the worker blocks")
            first = _blocked_worker(client)
            assert first is not None
            client.client_kill(first["addr"])
            await eventually(
                lambda: (entry := _blocked_worker(client)) is not None and entry["addr"] != first["addr"],
                30,
                "the worker blocks again on a new connection",
            )
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"x")
            await eventually(lambda: state_is(bus, job, "done"), 10, "done long before the cap")
    client.close()

"""The blocking pickup: an idle worker stays within its command budget, and an enqueue wakes it at once.

Each test runs a worker subprocess on a redis-server of its own, so every command the server sees comes
from that worker or from the test itself. Two views of the same 30 s are compared with the budget:

* ``INFO commandstats`` counts every command the server ran, and that includes the commands a Lua script
  runs inside itself; so the worker's own commands are the EVALSHA and BLPOP calls (the test's INFO
  calls are left out, and nothing else may have run at all outside scripts);
* ``MONITOR`` lists each command with the client that sent it, scripts' inner commands marked ``lua``,
  so counting the other lines counts exactly the commands the worker sent.
"""

from __future__ import annotations

import time

import pytest
import redis

from echomq import Bus, ids
from echomq.testing.monitor import CommandMonitor
from echomq.worker.fetcher import IDLE_BLOCK_S
from echomq.worker.runner import IDLE_COMMANDS_PER_MIN
from tests.support.workers import cli, eventually, state_is, stop_process

WINDOW_S = 30.0
# Commands a script runs inside itself; commandstats counts them too. Any other command in the window
# (a heartbeat SET, a PING, a stray GET) would be one the worker sent on its own.
_SCRIPT_INNER = {
    "time", "hget", "hset", "hdel", "hmget", "hincrby", "set", "zadd", "zrem", "zcard", "zrange",
    "zrangebyscore", "zpopmin", "lmove", "rpop", "rpush", "lpush", "llen", "del", "exists", "pexpireat",
}  # fmt: skip


def _calls(client: redis.Redis) -> dict[str, int]:
    stats = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(row["calls"]) for name, row in stats.items()}


def _blocked_worker(client: redis.Redis) -> dict | None:
    """The worker's connection blocked in BLPOP, if it is blocked right now."""
    for entry in client.client_list():
        if entry.get("cmd") == "blpop" and "b" in entry.get("flags", ""):
            return entry
    return None


def _idle_worker(url: str, tag: str):
    return cli(url, "--tag", tag, "worker", "tests.faults.handlers:noop")


@pytest.mark.slow
async def test_idle_worker_stays_within_its_command_budget(fresh_server):
    """Over 30 s an idle worker sends no more Redis commands than its documented budget allows."""
    client = redis.Redis(port=fresh_server.port)
    worker = _idle_worker(fresh_server.url, "idle")
    try:
        await eventually(
            lambda: _blocked_worker(client) is not None, 30, "the worker blocks on the wake list"
        )
        monitor = CommandMonitor(fresh_server.port)
        before = _calls(client)
        time.sleep(WINDOW_S)
        after = _calls(client)
        sent = monitor.close()
        assert worker.poll() is None, "the worker must still be running"
    finally:
        worker.terminate()
        worker.wait(20)
        stop_process(worker)
        client.close()
    budget = IDLE_COMMANDS_PER_MIN * WINDOW_S / 60
    delta = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    delta.pop("info", None)  # the test's own two INFO calls
    top_level = {name: n for name, n in delta.items() if name not in _SCRIPT_INNER}
    assert set(top_level) <= {"evalsha", "blpop"}, f"commands other than scripts and BLPOP: {top_level}"
    assert sum(top_level.values()) <= budget, f"{top_level} over the budget of {budget}"
    assert len(sent) <= budget, f"{len(sent)} commands sent over the budget of {budget}:\n" + "\n".join(sent)
    assert any('"BLPOP"' in line for line in sent), "an idle worker blocks on the wake list"


@pytest.mark.slow
async def test_enqueue_wakes_an_idle_worker_at_once(fresh_server):
    """A job enqueued just after an idle worker began a block is done long before that block would end."""
    client = redis.Redis(port=fresh_server.port)
    worker = _idle_worker(fresh_server.url, "wake")
    try:
        await eventually(
            lambda: _blocked_worker(client) is not None, 30, "the worker blocks on the wake list"
        )
        # Wait for a fresh block (the BLPOP began less than a second ago), so that only the wake token, not
        # the block's end, can make the worker claim within the next IDLE_BLOCK_S - 1 seconds.
        await eventually(
            lambda: (entry := _blocked_worker(client)) is not None and int(entry["idle"]) == 0,
            IDLE_BLOCK_S + 5,
            "a fresh block",
        )
        async with Bus.from_url(fresh_server.url, tag="wake") as bus:
            job = ids.mint("JOB")
            await bus.enqueue(job, lane="L", payload=b"wake up")
            await eventually(lambda: state_is(bus, job, "done"), IDLE_BLOCK_S / 2, "done within half a block")
    finally:
        worker.terminate()
        worker.wait(20)
        stop_process(worker)
        client.close()

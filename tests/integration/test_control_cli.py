"""The command line's control of a bus (echomq.cli.control): each command is the Bus call it names."""

from __future__ import annotations

import json

from echomq import Rate, ids
from tests.support.workers import run_cli


async def test_pause_resume_cap_and_rate_set_what_the_bus_reads(bus, redis_server, tag):
    url = redis_server.url
    assert run_cli(url, "--tag", tag, "pause").returncode == 0
    assert run_cli(url, "--tag", tag, "pause", "lane-a").returncode == 0
    capped = run_cli(url, "--tag", tag, "cap", "lane-b", "3")
    assert json.loads(capped.stdout) == {"caps": {"lane-b": 3}}
    rated = run_cli(url, "--tag", tag, "rate", "--lane", "*", "10/1000")
    assert json.loads(rated.stdout) == {"rates": {"*": "10/1000"}}
    settings = await bus.flow_settings()
    assert settings.paused
    assert settings.paused_lanes == {"lane-a"}
    assert settings.caps == {"lane-b": 3}
    assert settings.rates == {"*": Rate(10, 1000)}
    for args in (
        ("resume",),
        ("resume", "lane-a"),
        ("cap", "lane-b", "--clear"),
        ("rate", "--lane", "*", "--clear"),
    ):
        assert run_cli(url, "--tag", tag, *args).returncode == 0, args
    settings = await bus.flow_settings()
    assert (settings.paused, settings.paused_lanes, settings.caps, settings.rates) == (
        False,
        frozenset(),
        {},
        {},
    )


async def test_cancel_and_revoke_answer_with_their_outcome(bus, redis_server, tag):
    url = redis_server.url
    queued, active = ids.mint("JOB"), ids.mint("JOB")
    await bus.enqueue(active, lane="L", payload=b"")
    await bus.claim()
    await bus.enqueue(queued, lane="L", payload=b"")
    refused = run_cli(url, "--tag", tag, "cancel", active)
    assert (refused.returncode, refused.stdout.strip()) == (1, f"cancel {active}: refused")
    done = run_cli(url, "--tag", tag, "cancel", queued, "--reason", "not needed")
    assert (done.returncode, done.stdout.strip()) == (0, f"cancel {queued}: done")
    assert run_cli(url, "--tag", tag, "revoke", active).returncode == 0
    assert (await bus.inspect(queued)).error == "cancelled: not needed"
    assert (await bus.inspect(active)).state.value == "dead"


def test_bad_input_exits_2_and_changes_nothing(redis_server, tag, sync_redis):
    url = redis_server.url
    for args in (("cancel", "JOBnope"), ("cap", "L", "zero"), ("rate", "ten"), ("pause", "bad lane!")):
        result = run_cli(url, "--tag", tag, *args)
        assert result.returncode == 2, (args, result.stderr)
    assert sync_redis.keys(f"emq:{{{tag}}}:*") == []

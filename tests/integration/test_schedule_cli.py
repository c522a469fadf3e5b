"""`echomq schedule`: one step with --once prints each tick's job and admission (a second run's are
duplicates); bad input exits 2 with one line and leaves the bus without a key."""

from __future__ import annotations

import pytest

from echomq import Schedule, ids
from tests.support.workers import run_cli


def test_once_enqueues_the_due_ticks_and_a_second_run_is_a_duplicate(redis_server, tag, sync_redis):
    """Two runs of one step: the first admits the tick under the schedule's id, the second is a duplicate."""
    command = (
        "--tag",
        tag,
        "schedule",
        "report",
        "@hourly",
        "--lane",
        "reports",
        "--payload",
        "go",
        "--once",
    )
    first = run_cli(redis_server.url, *command)
    second = run_cli(redis_server.url, *command)
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    [(job, tick, admission)] = [line.split() for line in first.stdout.splitlines()]
    assert admission == "admitted"
    assert job == Schedule(name="report", lane="reports", cron="0 * * * *", payload=b"go").tick_id(int(tick))
    assert ids.timestamp_ms(job) == int(tick)
    again = [line.split() for line in second.stdout.splitlines()]
    if again[0][1] == tick:  # (an hour boundary between the runs adds a tick)
        assert again[0] == [job, tick, "duplicate"]
    assert sync_redis.zrange(f"emq:{{{tag}}}:lane:reports", 0, 0) == [job.encode()]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("beat", "61 * * * *", "--lane", "L"), "minute is 0-59, got 61"),
        (("beat", "@every 5ms", "--lane", "L"), "an interval is an int from 10"),
        (("beat", "@hourly", "--lane", "bad lane"), "a lane name is"),
        (("bad name", "@hourly", "--lane", "L"), "a schedule name is"),
        (("beat", "@hourly", "--lane", "L", "--max-attempts", "0"), "max_attempts"),
        (("beat", "@hourly", "--lane", "L", "--catch-up-ms", "999"), "catch_up_ms"),
        (("beat", "@hourly", "--lane", "L", "--catch-up-ms", "172800000"), "catch_up_ms"),
        (("beat", "@hourly", "--lane", "L", "--max-catch-up", "0"), "max_catch_up"),
    ],
)
def test_bad_input_exits_2_and_changes_nothing(redis_server, tag, sync_redis, arguments, message):
    """Each bad schedule or option: exit 2, one line naming the problem, no key written."""
    done = run_cli(redis_server.url, "--tag", tag, "schedule", *arguments, "--once")
    assert done.returncode == 2
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert sync_redis.keys(f"emq:{{{tag}}}:*") == []

"""The conformance suite's short schedule (CI): players submit under every kind of fault, and at the end
no guess is lost and none is scored twice. And the checks can fail: a state broken on purpose is caught."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import pytest

from codemojex import ranking
from codemojex.conformance.faults import INJECTED
from codemojex.conformance.harness import Run, run
from codemojex.conformance.punctuality import after_deaths, spread_check
from codemojex.conformance.schedule import Config
from codemojex.conformance.starts import Start, Starts
from codemojex.guesses import record_from_row
from codemojex.keys import GameKeys, guess_of
from echomq import Bus, ids, rows
from echomq.keyspace import Keyspace

SHORT = Config(
    guesses=1500,
    players=12,
    workers=3,
    concurrency=8,
    fault_every_s=0.15,
    boundary_rate=0.02,
    seed=11,
    socket_timeout_s=0.5,  # a pause lasts 0.75 s: one in nine faults, so Redis is not frozen half the run
)


@pytest.mark.slow
@pytest.mark.timeout(300)  # a hang guard, not a speed bound
def test_with_flow_control_and_named_tasks_on_the_gates_hold_and_nothing_is_lost():
    """The short schedule with every lane capped at one active job, the bus at 300 claims a second and
    named tasks served by the same workers beside the guesses: under every fault no guess is lost or
    scored twice, no lane ever ran two jobs at once and no second held more claims than the rate (both
    replayed from the events stream), and every named task's result came back right."""
    config = dataclasses.replace(SHORT, guesses=900, flow=True, flow_rate=300, tasks=40, quiet=False, seed=12)
    report = run(config)
    assert report.ok, report.to_text()
    assert (report.lost, report.double, report.vanished) == (0, 0, 0)
    assert report.scored == config.guesses
    flow = report.flow
    assert flow["most_active_in_a_lane"] == 1
    assert 0 < flow["most_claims_in_a_second"] <= 300
    assert flow["claims_seen"] >= config.guesses + config.tasks
    assert flow["tasks_sent"] == flow["tasks_right"] == 40
    assert report.redeliveries > 0  # the faults hit the gated run too


@pytest.mark.slow
@pytest.mark.timeout(300)  # a schedule, then the quiet phase's probes (a hang guard, not a speed bound)
def test_under_every_fault_no_guess_is_lost_or_scored_twice_with_appendfsync_always():
    report = run(SHORT)
    assert report.ok, report.to_text()
    assert report.acknowledged == SHORT.guesses
    assert report.scored == SHORT.guesses
    assert (report.lost, report.double, report.vanished) == (0, 0, 0)
    for kind in (*INJECTED, "boundary", "skew"):
        assert report.faults.get(kind, 0) > 0, f"no {kind} fault was injected: {report.faults}"
    assert report.duplicates_absorbed > 0
    assert 0 < report.over_http < report.acknowledged  # some players play over HTTP, the rest in-process
    assert report.redeliveries > 0
    assert report.retried > 0  # handler failures retried with backoff
    assert report.memory["used_memory_start"]
    assert report.memory["used_memory_end"]
    punctuality = report.punctuality
    assert punctuality["handler_starts"] >= report.scored
    assert punctuality["quiet_delayed_late_ms"]
    assert punctuality["quiet_retry_late_ms"]
    assert punctuality["quiet_held"] == 3 * SHORT.concurrency
    assert json.loads(report.to_json())["ok"] is True


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_at_full_speed_with_short_ttls_done_rows_and_the_done_set_stay_bounded():
    """Sampled during the run: rows past their TTL stay within a few seconds' worth of completions,
    with the library's sweep period (trimming must keep up with the work, not with the sweep)."""
    fast = Config(
        guesses=2000,
        players=40,
        workers=3,
        kinds=(),
        fail_rate=0.0,
        result_ttl_ms=1000,
        dedup_window_ms=120_000,
        sweep_every_s=10.0,
        quiet=False,
        seed=13,
    )
    report = run(fast)
    assert report.ok, report.to_text()
    assert report.scored == fast.guesses
    assert report.memory["samples"] >= 4, report.to_text()  # sampled along the run, not only at its end
    assert report.memory["used_memory_start"]
    assert report.memory["used_memory_end"]


@pytest.mark.slow
def test_a_redis_pause_or_a_cut_link_shorter_than_the_lease_dead_letters_no_job():
    """With one try per guess, neither a claim whose reply a pause swallowed nor a score call cut off by
    a pause or a cut link may spend that try: the claim is asked again, the score call retried."""
    paused = Config(
        guesses=3000,
        players=20,
        workers=3,
        kinds=("pause", "cut"),
        max_attempts=1,
        socket_timeout_s=0.5,
        fault_every_s=1.0,
        lease_ms=5000,  # pauses of 0.75 s: far shorter, with room for a busy machine's late renewal
        fail_rate=0.0,
        quiet=False,
        seed=14,
    )
    report = run(paused)
    assert report.faults.get("pause", 0) > 0, report.to_text()
    assert report.faults.get("cut", 0) > 0, report.to_text()
    assert not report.violations, report.to_text()
    assert (report.lost, report.double, report.dead) == (0, 0, 0), report.to_text()


@pytest.mark.slow
def test_with_appendfsync_everysec_a_redis_crash_may_lose_admissions_but_never_scores_twice():
    """everysec may lose up to a second of acknowledged writes per crash: counted, never a double."""
    everysec = dataclasses.replace(
        SHORT,
        appendfsync="everysec",
        seed=12,
        fault_every_s=0.3,
        kinds=("redis", "kill", "boundary"),
        quiet=False,
    )
    report = run(everysec)
    assert report.double == 0, report.to_text()
    assert report.lost == 0, report.to_text()
    assert report.faults.get("redis", 0) > 0, report.to_text()
    assert not report.violations, report.to_text()
    assert report.acknowledged - report.vanished == report.scored + report.dead


@pytest.fixture
def finished_run(redis_server, tag):
    """A short run against the session's Redis (a Redis of the caller's own, as a user would run it),
    which outlives the run, so its state can be broken and checked again."""
    return _short_run(redis_server.url, tag)


def _short_run(redis_url: str, tag: str) -> Run:
    """A 200-guess run under kills and boundary faults on ``redis_url``, passed, its state left in place."""
    config = dataclasses.replace(
        SHORT,
        guesses=200,
        players=4,
        redis_url=redis_url,
        tag=tag,
        kinds=("kill", "boundary"),
        quiet=False,
    )
    the_run = Run(config)
    report = the_run.execute_blocking()
    assert report.ok, report.to_text()
    return the_run


def _one_scored_job(client, tag):
    keys = Keyspace(tag)
    job = client.zrange(keys.done, 0, 0)[0].decode()
    return keys, GameKeys(tag), job


def test_the_checks_catch_a_lost_guess(finished_run, sync_redis, tag):
    _, game_keys, job = _one_scored_job(sync_redis, tag)
    sync_redis.delete(game_keys.guess(guess_of(job)))
    report = finished_run.recheck()
    assert not report.ok
    assert report.lost == 1
    assert any(job in violation and "not scored" in violation for violation in report.violations)


def test_the_checks_catch_a_double_effect_and_a_double_charge(finished_run, sync_redis, tag):
    _, game_keys, job = _one_scored_job(sync_redis, tag)
    sync_redis.hincrby(game_keys.latency, "count", 1)  # as if score.lua had applied an effect twice
    player = json.loads(rows.payload_of(sync_redis.hgetall(Keyspace(tag).job(job))))["player"]
    charge = next(
        entry
        for entry in sync_redis.lrange(game_keys.ledger(player), 0, -1)
        if json.loads(entry)["job"] == job
    )
    sync_redis.rpush(game_keys.ledger(player), charge)
    report = finished_run.recheck()
    assert report.double >= 1
    assert any("effects observed" in violation for violation in report.violations)
    assert any(f"{job} was charged 2 times" in violation for violation in report.violations)


def test_the_checks_catch_a_second_allowance_and_a_reward_without_a_solve(finished_run, sync_redis, tag):
    """The run under kills held the economy's invariants (each allowance and reward once per player and
    round); a forged second allowance, and a reward marker for a player who never solved, are caught."""
    assert not [v for v in finished_run.recheck().violations if "allowance" in v or "reward" in v]
    _, game_keys, job = _one_scored_job(sync_redis, tag)
    round_id = sync_redis.zrange(f"cmx:{{{tag}}}:rounds", 0, 0)[0].decode()
    player = json.loads(rows.payload_of(sync_redis.hgetall(Keyspace(tag).job(job))))["player"]
    balance = int(sync_redis.hget(game_keys.wallet(player), "coin") or 0)
    forged = {"at": 1, "currency": "coin", "delta": 50, "balance": balance + 50, "reason": "allowance",
              "job": "", "round": round_id}  # fmt: skip
    sync_redis.rpush(game_keys.ledger(player), json.dumps(forged))
    sync_redis.hincrby(game_keys.wallet(player), "coin", 50)
    standings = sync_redis.hgetall(game_keys.standing(round_id))
    unsolved = next(p.decode() for p, member in standings.items() if not member.startswith(b"0"))
    sync_redis.hset(game_keys.rewards(round_id), unsolved, job)
    violations = finished_run.recheck().violations
    assert any(f"{player} took the coin allowance of {round_id} 2 times" in v for v in violations)
    assert any(f"{unsolved} was rewarded in {round_id} but has not solved it" in v for v in violations)


def test_the_checks_catch_a_job_in_two_places_and_a_lane_out_of_the_ring(finished_run, sync_redis, tag):
    keys, _, job = _one_scored_job(sync_redis, tag)
    sync_redis.zadd(keys.lane("PLR00000000000000000000000"), {job: 0})
    report = finished_run.recheck()
    assert any(f"{job} is in 2 locations" in violation for violation in report.violations)
    assert any("the ring" in violation for violation in report.violations)


def test_the_checks_catch_a_board_that_is_not_the_ranking(finished_run, sync_redis, tag):
    round_id = sync_redis.zrange(f"cmx:{{{tag}}}:rounds", 0, 0)[0].decode()
    sync_redis.zpopmin(GameKeys(tag).board(round_id))
    report = finished_run.recheck()
    assert any("the board" in violation for violation in report.violations)


def test_the_checks_catch_a_stats_result_that_is_not_the_fold(finished_run, sync_redis, tag):
    """A player's stats result in the round (results:<PLR>) that is not their fold is a violation."""
    _, game_keys, job = _one_scored_job(sync_redis, tag)
    player = json.loads(rows.payload_of(sync_redis.hgetall(Keyspace(tag).job(job))))["player"]
    round_id = sync_redis.zrange(f"cmx:{{{tag}}}:rounds", 0, 0)[0].decode()
    sync_redis.hset(game_keys.results(player), round_id, 99)
    report = finished_run.recheck()
    assert any(f"{player}'s stats result is 99" in violation for violation in report.violations)


def test_the_checks_catch_attempts_that_are_not_the_admission_order_fold(finished_run, sync_redis, tag):
    """A record renumbered out of admission order, and a standing that is not its fold, are violations."""
    _, game_keys, job = _one_scored_job(sync_redis, tag)
    guess_key = game_keys.guess(guess_of(job))
    sync_redis.hincrby(guess_key, "attempt", 1)
    round_id, player = (v.decode() for v in sync_redis.hmget(guess_key, "round", "player"))
    sync_redis.hset(game_keys.standing(round_id), player, "166@" + "0" * 13 + "000000:" + player)
    report = finished_run.recheck()
    assert any(f"{guess_of(job)} records" in violation for violation in report.violations)
    assert any(f"{player}'s standing" in violation for violation in report.violations)


@pytest.fixture(scope="module")
def broken_run(redis_server):
    """One short run for the new checks' broken states (each test breaks another part of it), under a
    tag of its own: one run, not one per test, keeps CI short."""
    tag = f"broken-{os.getpid()}"
    return _short_run(redis_server.url, tag), tag


def test_the_checks_catch_done_rows_left_untrimmed_past_their_ttl(broken_run, sync_redis):
    """A done set the trimming left behind (1,000 rows two TTLs old) breaks the memory bound."""
    finished_run, tag = broken_run
    keys = Keyspace(tag)
    seconds, _ = sync_redis.time()
    old = (int(seconds) - 7200) * 1000  # two hours ago: past the default one-hour result TTL
    pipe = sync_redis.pipeline(transaction=False)
    for _ in range(1000):
        job = ids.mint("JOB")
        pipe.hset(
            keys.job(job),
            mapping={rows.STATE: "done", rows.LANE: "PLR0", rows.FINISHED: old, rows.ATTEMPTS: 1},
        )
        pipe.zadd(keys.done, {job: old})
    pipe.execute()
    report = finished_run.recheck()
    assert any("past their TTL" in violation for violation in report.violations), report.to_text()
    assert report.memory["past_ttl_max"] >= 1000


def _fold(records):
    standings = {}
    for record in records:
        standings[record.player] = ranking.fold(
            standings.get(record.player),
            record.player,
            record.feedback.hits,
            record.feedback.nears,
            record.submitted_ms,
        )
    return [ranking.board_member(s) for s in ranking.rank(standings.values())]


def test_the_checks_catch_a_board_folded_in_scoring_order(broken_run, sync_redis):
    """A board folded in delivery order, not admission order, is caught (the old check accepted it)."""
    finished_run, tag = broken_run
    game_keys = GameKeys(tag)
    round_id = sync_redis.zrange(f"cmx:{{{tag}}}:rounds", 0, 0)[0].decode()
    ids_ = [raw.decode() for raw in sync_redis.zrange(game_keys.scored(round_id), 0, -1)]
    rows = {guess: sync_redis.hgetall(game_keys.guess(guess)) for guess in ids_}
    player = rows[ids_[0]][b"player"]
    mine = sorted(guess for guess, row in rows.items() if row[b"player"] == player)
    assert len(mine) >= 2
    # As if this player's guesses were delivered last-minted first, all with the same feedback: folded in
    # that order, the tie-break time is the latest guess's, not the earliest's.
    serials = sorted(int(rows[guess][b"serial"]) for guess in mine)
    for guess, serial in zip(reversed(mine), serials, strict=True):
        sync_redis.hset(game_keys.guess(guess), mapping={"serial": serial, "code": rows[mine[0]][b"code"]})
    records = [record_from_row(g, sync_redis.hgetall(game_keys.guess(g))) for g in ids_]
    in_scoring_order = _fold(sorted(records, key=lambda r: r.serial))
    sync_redis.delete(game_keys.board(round_id))
    sync_redis.zadd(game_keys.board(round_id), dict.fromkeys(in_scoring_order, 0))
    assert in_scoring_order != _fold(sorted(records, key=lambda r: r.id))
    report = finished_run.recheck()
    assert any("admission order" in violation for violation in report.violations), report.to_text()


async def test_the_checks_catch_a_dead_job_that_no_handler_ran(broken_run, redis_server):
    """A claim that no handler received (its reply lost), whose lease ran out on its last try, is caught."""
    finished_run, tag = broken_run
    job = ids.mint("JOB")
    async with Bus.from_url(redis_server.url, tag=tag) as bus:
        await bus.enqueue(job, lane="PLR-lost-reply", payload=b"{}", max_attempts=1)
        [claim] = await bus.claim(count=1, lease_ms=100, owner="elsewhere:1")  # alive; no handler run
        assert claim.job == job
        await asyncio.sleep(0.2)
        await bus.sweep()
    report = finished_run.recheck()
    assert report.dead == 0  # not an admitted guess: only the new check sees it
    assert any(job in v and "no handler ever ran it" in v for v in report.violations), report.to_text()


def test_the_spread_check_catches_a_dead_workers_jobs_run_by_one_idle_worker():
    """24 reclaimed jobs (3 workers' slots) run by 1 of 3 idle workers is a violation; by 3 it is not."""
    held = [(f"JOB{n}", 1) for n in range(24)]
    one = Starts({job: [Start(job, 2, 1_000 + n, 7)] for n, (job, _) in enumerate(held)}, set())
    rerun, spreads = after_deaths([(900, held)], one)
    assert spreads == [1]
    assert rerun[0] == 100
    assert spread_check(24, spreads[0], idle=3, concurrency=8)
    three = Starts({job: [Start(job, 2, 1_000, 7 + n % 3)] for n, (job, _) in enumerate(held)}, set())
    assert after_deaths([(900, held)], three)[1] == [3]
    assert spread_check(24, 3, idle=3, concurrency=8) == []
    assert spread_check(8, 1, idle=3, concurrency=8) == []  # one worker's slots: one worker suffices


def test_a_schedule_names_only_known_faults():
    with pytest.raises(ValueError, match="unknown fault kinds"):
        Config(kinds=("kill", "meteor"))
    with pytest.raises(ValueError, match="appendfsync"):
        Config(appendfsync="never")


def _cli(*args):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    return subprocess.run(
        [sys.executable, "-m", "codemojex.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_command_runs_a_schedule_and_answers_in_json(tmp_path):
    done = _cli("--json", "conformance", "--guesses", "200", "--players", "4", "--kinds", "kill,boundary",
                "--no-quiet", "--report", str(tmp_path / "report.json"))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(done.stdout)
    assert (shown["ok"], shown["acknowledged"], shown["lost"], shown["double"]) == (True, 200, 0, 0)
    assert json.loads((tmp_path / "report.json").read_text())["acknowledged"] == 200


def test_the_command_refuses_an_unknown_fault_kind_in_one_line():
    done = _cli("conformance", "--kinds", "kill,meteor")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "unknown fault kinds ['meteor']" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.timeout(600)  # a wait limit: three masters, the moves and the workers on a shared machine
def test_on_a_cluster_whose_slot_is_resharded_meanwhile_no_guess_is_lost_or_scored_twice():
    """The cluster schedule: players (in process and over HTTP), workers (some killed) and sweeps run on a
    three-master cluster while the bus's slot moves to another master and back, key by key; nothing is
    lost, doubled or stranded, and the invariants hold on the master that serves the slot at the end."""
    config = dataclasses.replace(
        SHORT,
        guesses=400,
        players=6,
        workers=2,
        concurrency=4,
        seed=13,
        fault_every_s=1.0,
        kinds=("kill", "sweeps"),
        cluster=True,
        quiet=False,  # the quiet phase's punctuality is measured by the single-server schedule
    )
    report = run(config)
    assert report.ok, report.to_text()
    assert report.faults.get("reshard", 0) >= 2, report.to_text()  # there and back at least
    assert report.acknowledged == config.guesses
    assert report.scored == config.guesses
    assert (report.lost, report.double, report.vanished) == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.timeout(
    600
)  # a wait limit: six nodes, a failover, the moves and the workers on a shared machine
def test_when_the_slots_master_fails_over_meanwhile_no_acknowledged_guess_is_lost_or_scored_twice():
    """The cluster schedule with ``failover``: one replica per master, durable admission, and between the
    moves the slot's master is SIGKILLed, its replica promoted and the old master back as its replica;
    every acknowledged guess is scored exactly once on the promoted master, none lost, none doubled."""
    config = dataclasses.replace(
        SHORT,
        guesses=200,
        players=6,
        workers=2,
        concurrency=4,
        seed=17,
        fault_every_s=1.0,
        kinds=("kill", "sweeps", "failover"),
        cluster=True,
        quiet=False,
    )
    assert config.bus_settings().wait_replicas == 1
    report = run(config)
    assert report.ok, report.to_text()
    assert report.faults.get("failover", 0) >= 1, report.to_text()
    assert report.faults.get("reshard", 0) >= 2, report.to_text()
    assert report.acknowledged == config.guesses
    assert report.scored == config.guesses
    assert (report.lost, report.double, report.vanished) == (0, 0, 0)

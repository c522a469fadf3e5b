"""The leaderboard: solved first, then best feedback, then earlier (the solve time), then fewer attempts;
kept by the score script in rank order, equal to the ranking recomputed from the GES records alone, and
folded in admission order whatever order the guesses are delivered in. A board of the earlier rule
(attempts before time) is read from the records, refolded player by player, and rebuilt on demand."""

from __future__ import annotations

import asyncio

from codemojex import access, guesses, leaderboard, players, ranking, rounds, score_worker
from codemojex.game import Game
from codemojex.guesses import Outcome, Refusal
from echomq import Claim, Finish, Job, Worker
from tests.support.game import KEYBOARD, SECRET, claim_job, legacy_member, text
from tests.support.workers import eventually, running

MISS = ("🍑",) * 6  # no key of the secret


async def _score_all(game) -> None:
    while claims := await game.bus.claim(10):
        for claim in claims:
            assert await score_worker.handle(game, Job(claim)) is Finish.DONE


async def _after(game_probe, job: str) -> None:
    """Wait until the Redis clock has passed ``job``'s admission millisecond."""
    admitted_at = int(game_probe.bus.field(job, "created") or -1)
    while game_probe.bus.now_ms() <= admitted_at:
        await asyncio.sleep(0.001)


async def test_the_board_ranks_solved_then_feedback_then_time_then_attempts(game, the_round, game_probe):
    """Five players with scripted guesses, one after another, land in the order the ranking rules give:
    the first to solve ranks first, though they took two attempts and the next solver one."""
    names = ["solver in two", "solver in one", "two hits", "two hits two nears", "nothing"]
    who = {name: await players.register(game, name) for name in names}
    plays = {
        "solver in two": [("🍑",) * 6, SECRET],
        "solver in one": [SECRET],
        "two hits": [("🍎", "🍌", "🍑", "🍑", "🍑", "🍑")],
        "two hits two nears": [("🍎", "🍌", "🍒", "🍇", "🍑", "🍑")],
        "nothing": [("🍍",) * 6],
    }
    for name, played in plays.items():
        for guess in played:
            job = await _admit(game, the_round.id, who[name].id, guess)
        await _score_all(game)
        await _after(game_probe, job)

    board = await leaderboard.read_board(game, the_round.id)
    assert [entry.name for entry in board] == [
        "solver in two",
        "solver in one",
        "two hits two nears",
        "two hits",
        "nothing",
    ]
    assert [entry.rank for entry in board] == [1, 2, 3, 4, 5]
    assert [(entry.standing.solved, entry.standing.attempts) for entry in board[:2]] == [(True, 2), (True, 1)]
    assert board[0].standing.best_at_ms < board[1].standing.best_at_ms
    records = await leaderboard.scored_records(game, the_round.id)
    assert leaderboard.recompute(records) == [entry.standing for entry in board]


async def test_ties_on_feedback_go_to_the_earlier_guess(game, the_round):
    """Two players with the same best in the same attempts: the earlier admitted ranks first."""
    early, late = await players.register(game, "early"), await players.register(game, "late")
    for player in (early, late):
        await guesses.submit(game, the_round.id, player.id, text(("🍎", "🍑", "🍑", "🍑", "🍑", "🍑")))
    await _score_all(game)
    board = await leaderboard.read_board(game, the_round.id)
    assert [entry.name for entry in board] == ["early", "late"]
    assert board[0].standing.best_at_ms <= board[1].standing.best_at_ms


async def test_a_solved_player_is_refused_and_late_scored_guesses_do_not_count(
    game, the_round, player, game_probe
):
    """Guesses queued before the solve are scored but not counted; after the solve submit refuses."""
    queued = [await guesses.submit(game, the_round.id, player.id, text(g)) for g in (SECRET, ("🍑",) * 6)]
    await _score_all(game)
    records = {r.job: r for r in await leaderboard.scored_records(game, the_round.id)}
    first, late = records[queued[0].job], records[queued[1].job]
    assert (first.counted, first.attempt) == (True, 1)
    assert (late.counted, late.attempt) == (False, 0)
    standing = game_probe.standing(the_round.id, player.id)
    assert (standing.solved, standing.attempts) == (True, 1)
    refused = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    assert refused.refusal is Refusal.ALREADY_SOLVED
    assert leaderboard.recompute(list(records.values())) == [standing]


async def test_a_worker_keeps_the_board_equal_to_the_recomputed_ranking(game, the_round):
    """Thirty players, three guesses each, scored by a real worker with 8 slots: board == recompute."""
    field = [await players.register(game, f"p{n}") for n in range(30)]
    pool = ["🍎", "🍌", "🍇", "🍒", "🥝", "🍑"]
    for n, player in enumerate(field):
        for k in range(3):
            guess = [pool[(n + k + i) % 6] for i in range(6)]
            await guesses.submit(game, the_round.id, player.id, guess)
    async with running(Worker(game.bus, score_worker.ScoreWorker(game).handle, concurrency=8)) as worker:
        await eventually(lambda: worker.processed == 90, what="all 90 guesses scored")
    board = await leaderboard.read_board(game, the_round.id)
    records = await leaderboard.scored_records(game, the_round.id)
    assert len(records) == 90
    assert leaderboard.recompute(records) == [entry.standing for entry in board]
    job = await claim_job_or_none(game)
    assert job is None


async def _admit(game, round_id: str, player_id: str, guess: tuple[str, ...]) -> str:
    submitted = await guesses.submit(game, round_id, player_id, text(guess))
    assert submitted.outcome is Outcome.ADMITTED
    return submitted.job


async def _claim_all(game, count: int) -> dict[str, Claim]:
    claims = await game.bus.claim(count)
    assert len(claims) == count
    return {claim.job: claim for claim in claims}


async def _redeliver(game, game_probe, job: str) -> Claim:
    """The worker holding ``job`` died: its lease runs out, the sweep reaps it, another worker claims it."""
    game_probe.bus.expire(job)
    assert (await game.bus.sweep()).reclaimed == 1
    [claim] = await game.bus.claim(1)
    assert (claim.job, claim.token) == (job, 2)
    return claim


async def test_a_guess_redelivered_after_the_players_later_solve_still_counts(game, the_round, game_probe):
    """Two players with identical submissions get the same attempts and are ordered by admission alone,
    although one's first guess is redelivered, and scored, after their later solving guess."""
    first = await players.register(game, "first")  # registered and admitted first: ranks first on a tie
    second = await players.register(game, "second")
    jobs = {}
    for guess in (MISS, SECRET):  # admitted: first's miss, second's miss, first's solve, second's solve
        for player in (first, second):
            jobs[player.id, guess] = await _admit(game, the_round.id, player.id, guess)
    claims = await _claim_all(game, 4)
    for guess in (MISS, SECRET):  # first: delivered in admission order
        assert await score_worker.handle(game, Job(claims[jobs[first.id, guess]])) is Finish.DONE
    # second: the worker holding the miss dies; the solve is scored; then the miss is redelivered.
    assert await score_worker.handle(game, Job(claims[jobs[second.id, SECRET]])) is Finish.DONE
    again = await _redeliver(game, game_probe, jobs[second.id, MISS])
    assert await score_worker.handle(game, Job(again)) is Finish.DONE

    board = await leaderboard.read_board(game, the_round.id)
    assert [(entry.name, entry.standing.solved, entry.standing.attempts) for entry in board] == [
        ("first", True, 2),
        ("second", True, 2),
    ]
    for entry in board:  # the ranking time: the admission of the solving guess
        solve = jobs[entry.standing.player, SECRET]
        assert entry.standing.best_at_ms == int(game_probe.bus.field(solve, "created") or -1)
    records = {record.job: record for record in await leaderboard.scored_records(game, the_round.id)}
    for player in (first, second):
        assert [
            (records[jobs[player.id, g]].counted, records[jobs[player.id, g]].attempt) for g in (MISS, SECRET)
        ] == [
            (True, 1),
            (True, 2),
        ]
    assert leaderboard.recompute(records.values()) == [entry.standing for entry in board]


async def test_the_tie_break_time_is_the_admission_of_the_first_best_guess_whatever_the_delivery(
    game, the_round, player, game_probe
):
    """Two guesses with equal feedback scored in reverse order: the best is dated by the earlier admitted."""
    one_hit = ("🍎", "🍑", "🍑", "🍑", "🍑", "🍑")
    other_hit = ("🍑", "🍌", "🍑", "🍑", "🍑", "🍑")  # the same feedback: one hit, no near
    earlier = await _admit(game, the_round.id, player.id, one_hit)
    admitted_at = int(game_probe.bus.field(earlier, "created") or -1)
    while game_probe.bus.now_ms() <= admitted_at:  # so the two admissions have different times
        await asyncio.sleep(0.001)
    later = await _admit(game, the_round.id, player.id, other_hit)
    assert int(game_probe.bus.field(later, "created") or -1) > admitted_at
    claims = await _claim_all(game, 2)
    for job in (later, earlier):
        assert await score_worker.handle(game, Job(claims[job])) is Finish.DONE

    standing = game_probe.standing(the_round.id, player.id)
    assert standing is not None
    assert (standing.best_hits, standing.best_nears, standing.attempts) == (1, 0, 2)
    assert standing.best_at_ms == admitted_at
    records = {record.job: record for record in await leaderboard.scored_records(game, the_round.id)}
    assert [(records[job].attempt, records[job].serial) for job in (earlier, later)] == [(1, 2), (2, 1)]
    assert leaderboard.recompute(records.values()) == [standing]


async def _earlier_rules_board(game, the_round, game_probe) -> dict[str, players.Player]:
    """A round scored as before solve time ranked first: ``first`` solves in three, then ``replay`` in one,
    and ``probe`` has two hits; its standings and board rewritten in the earlier rule's members."""
    who = {name: await players.register(game, name) for name in ("first", "replay", "probe")}
    for guess in (MISS, ("🍎", "🍌", "🍑", "🍑", "🍑", "🍑"), SECRET):
        job = await _admit(game, the_round.id, who["first"].id, guess)
    await _admit(game, the_round.id, who["probe"].id, ("🍎", "🍌", "🍑", "🍑", "🍑", "🍑"))
    await _score_all(game)
    await _after(game_probe, job)
    await _admit(game, the_round.id, who["replay"].id, SECRET)
    await _score_all(game)
    standing_key, board_key = game.keys.standing(the_round.id), game.keys.board(the_round.id)
    for player in who.values():
        member = game_probe.client.hget(standing_key, player.id).decode()
        old = legacy_member(ranking.parse_board_member(member))
        game_probe.client.zrem(board_key, member)
        game_probe.client.zadd(board_key, {old: 0})
        game_probe.client.hset(standing_key, player.id, old)
    in_bytes_order = [m.decode().split(":", 1)[1] for m in game_probe.client.zrange(board_key, 0, -1)]
    assert in_bytes_order == [who[name].id for name in ("replay", "first", "probe")]  # the earlier rule
    return who


async def test_a_board_of_the_earlier_rule_is_read_in_the_current_order(game, the_round, game_probe):
    await _earlier_rules_board(game, the_round, game_probe)
    board = await leaderboard.read_board(game, the_round.id)
    assert [(entry.rank, entry.name) for entry in board] == [(1, "first"), (2, "replay"), (3, "probe")]
    records = await leaderboard.scored_records(game, the_round.id)
    assert [entry.standing for entry in board] == leaderboard.recompute(records)
    assert [entry.name for entry in await leaderboard.read_board(game, the_round.id, 1)] == ["first"]


async def test_scoring_refolds_a_standing_of_the_earlier_rule_from_the_records(game, the_round, game_probe):
    """The stored member is not read (its fields are in another order): the player is refolded."""
    who = await _earlier_rules_board(game, the_round, game_probe)
    await _admit(game, the_round.id, who["probe"].id, ("🍎", "🍌", "🍇", "🍑", "🍑", "🍑"))
    await _score_all(game)
    standing = game_probe.standing(the_round.id, who["probe"].id)
    assert standing is not None
    assert (standing.solved, standing.best_hits, standing.attempts) == (False, 3, 2)
    records = await leaderboard.scored_records(game, the_round.id)
    assert standing == leaderboard.fold_records(records).standings[who["probe"].id]
    board = await leaderboard.read_board(game, the_round.id)
    assert [entry.standing for entry in board] == leaderboard.recompute(records)


async def test_rebuild_rewrites_the_board_in_the_current_rule(game, the_round, game_probe):
    await _earlier_rules_board(game, the_round, game_probe)
    assert await leaderboard.rebuild(game, the_round.id) == 3
    records = await leaderboard.scored_records(game, the_round.id)
    expected = leaderboard.recompute(records)
    board_key = game.keys.board(the_round.id)
    members = [m.decode() for m in game_probe.client.zrange(board_key, 0, -1)]
    assert members == [ranking.board_member(s) for s in expected]
    for s in expected:
        assert game_probe.standing(the_round.id, s.player) == s
    snapshot = game_probe.snapshot()
    assert await leaderboard.rebuild(game, the_round.id) == 3  # safe to repeat
    assert game_probe.snapshot() == snapshot
    assert [entry.name for entry in await leaderboard.read_board(game, the_round.id)] == [
        "first",
        "replay",
        "probe",
    ]


async def test_rebuild_is_fenced_on_the_records_it_read(game, the_round, game_probe):
    """A rebuild that folded fewer records than are scored now (one was scored since) changes nothing."""
    await _earlier_rules_board(game, the_round, game_probe)
    snapshot = game_probe.snapshot()
    keys = [game.keys.standing(the_round.id), game.keys.board(the_round.id), game.keys.scored(the_round.id)]
    assert await game.run("rebuild_board", keys, [4, "[]"]) == [0, 5]
    assert game_probe.snapshot() == snapshot


async def test_the_operators_redis_user_may_rebuild_a_board(acl):
    """``codemojex board --rebuild`` runs as the operator's Redis user: its script's commands are allowed."""
    async with Game.from_url(acl.url(access.ADMIN), acl.tag) as admin:
        await access.load_scripts(admin.redis)
        the_round = await rounds.open_round(admin, keyboard=list(KEYBOARD), secret=list(SECRET))
        ada = await players.register(admin, "Ada")
        await _admit(admin, the_round.id, ada.id, SECRET)
        await _score_all(admin)
    async with Game.from_url(acl.url(access.OPERATOR), acl.tag) as operator:
        assert await leaderboard.rebuild(operator, the_round.id) == 1
        [entry] = await leaderboard.read_board(operator, the_round.id)
    assert (entry.name, entry.standing.solved, entry.standing.attempts) == ("Ada", True, 1)


async def claim_job_or_none(game):
    claims = await game.bus.claim(1)
    return claims[0] if claims else None


_ = claim_job  # the shared helper is used by the other game tests

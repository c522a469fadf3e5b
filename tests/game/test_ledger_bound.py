"""A player's ledger stays bounded (``GameSettings.ledger_kept``) however many rounds they play: an
admission that finds it at the cap keeps the newest half after one ``carry`` entry per currency dropped,
so replaying it from zero still gives every balance, the balances never change, a retried submit never
trims twice, and the conformance checks still catch a forged double allowance in the kept window.
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest

from codemojex import guesses, players, rounds, wallet
from codemojex.conformance import invariants
from codemojex.engine import score
from codemojex.errors import InvalidOption
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome
from codemojex.keys import OPERATION
from codemojex.payload import decode_payload
from codemojex.score_worker import score_call
from echomq import Bus, ids
from tests.support.game import KEYBOARD, SECRET, text

CAP = 12
ADDED_BY_ONE_CALL = 3  # an admission's allowance (ticket, coin) and its charge


def entries(sync_redis, game: Game, player_id: str) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in sync_redis.lrange(game.keys.ledger(player_id), 0, -1)]


async def play_round(game: Game, player_id: str) -> tuple[str, str]:
    """Open a round, solve it at the first guess, score it: the round and the guess's JOB."""
    the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
    submitted = await guesses.submit(game, the_round.id, player_id, text(SECRET))
    assert submitted.outcome is Outcome.ADMITTED
    for claim in await game.bus.claim(1, lease_ms=60_000):
        request = decode_payload(claim.payload)
        await game.run("score", *score_call(game, claim, request, score(SECRET, request.guess)))
    return the_round.id, submitted.job


@pytest.fixture
async def small(redis_server, tag):
    async with Game(Bus.from_url(redis_server.url, tag=tag), GameSettings(ledger_kept=CAP)) as the_game:
        yield the_game


def test_the_cap_is_validated():
    assert GameSettings().ledger_kept == 1000
    for bad in (0, 9, 10_000_001, True, "100"):
        with pytest.raises(InvalidOption):
            GameSettings(ledger_kept=bad)  # type: ignore[arg-type]


async def test_many_rounds_keep_the_ledger_bounded_and_exact(small, sync_redis):
    """40 rounds of about 3 entries each with a cap of 12: the ledger never holds more than the cap plus
    one call's entries (and a reward), replays exactly from zero after every round, and the balances are
    what the rules give, as if nothing had been trimmed."""
    ada = await players.register(small, "Ada")
    most = 0
    for number in range(1, 41):
        await play_round(small, ada.id)
        most = max(most, sync_redis.llen(small.keys.ledger(ada.id)))
        held = await wallet.read_wallet(small, ada.id)
        assert held.ledger_total == len(held.ledger)
        assert wallet.reconcile(held) == [], number
        # Each round: topped up to 3 tickets and 50 coins, a ticket paid, 25 coins of reward.
        assert held.balances == {"ticket": 2, "coin": 50 + 25 * number}
    assert most <= CAP + ADDED_BY_ONE_CALL + 1  # + the reward scored after the admission
    kept = entries(sync_redis, small, ada.id)
    carries = [e for e in kept if e["reason"] == "carry"]
    assert {e["currency"] for e in carries} == {"ticket", "coin"}
    assert kept[: len(carries)] == carries  # the carries head the ledger
    assert all(e["delta"] == e["balance"] and e["job"] == "" for e in carries)
    # A partial read (the newest entries only) still reconciles.
    assert wallet.reconcile(await wallet.read_wallet(small, ada.id, ledger_limit=3)) == []


async def test_a_trim_is_amortized(small, sync_redis):
    """A trim keeps the newest half: the next few admissions append without trimming."""
    ada = await players.register(small, "Ada")
    lengths = []
    for _ in range(12):
        await play_round(small, ada.id)
        lengths.append(sync_redis.llen(small.keys.ledger(ada.id)))
    drops = [i for i in range(1, len(lengths)) if lengths[i] < lengths[i - 1]]
    assert drops
    assert all(b - a >= 2 for a, b in itertools.pairwise(drops))


async def test_a_retried_submit_around_the_trim_changes_nothing(small, sync_redis):
    """The admission that trims, retried (the same JOB again, or its submit.lua call run twice): a
    duplicate, the ledger and the balances untouched, no second trim and no entry lost."""
    ada = await players.register(small, "Ada")
    while sync_redis.llen(small.keys.ledger(ada.id)) < CAP - 1:
        await play_round(small, ada.id)
    the_round = await rounds.open_round(small, keyboard=list(KEYBOARD), secret=list(SECRET))
    guess = text(("🍍",) * 6)
    first = await guesses.submit(small, the_round.id, ada.id, guess)
    assert first.outcome is Outcome.ADMITTED
    assert sync_redis.llen(small.keys.ledger(ada.id)) < CAP  # it trimmed
    before = entries(sync_redis, small, ada.id)
    held = await wallet.read_wallet(small, ada.id)
    again = await guesses.submit(small, the_round.id, ada.id, guess, job_id=first.job)
    assert again.outcome is Outcome.DUPLICATE
    digest = guesses.request_digest(the_round.id, ada.id, guess)
    call = guesses.submit_call(small, first.job, the_round.id, ada.id, ("🍍",) * 6, digest=digest)
    assert int((await small.run("submit", *call))[0]) == 0
    assert entries(sync_redis, small, ada.id) == before
    assert await wallet.read_wallet(small, ada.id) == held
    assert wallet.reconcile(held) == []
    assert [e["job"] for e in before if e["reason"] == "guess"][-1] == first.job


async def test_the_conformance_checks_hold_after_trims_and_catch_a_forged_allowance(small, sync_redis):
    """After many trimmed rounds the wallet and economy checks pass for every round played (an allowance
    trimmed away is not missing); a second allowance forged in the kept window is caught."""
    ada = await players.register(small, "Ada")
    played = [await play_round(small, ada.id) for _ in range(15)]
    rows = invariants.job_rows(sync_redis, small.bus.keys)
    states = [invariants.read_game(sync_redis, small.keys, round_id, [ada.id]) for round_id, _ in played]
    for (round_id, _job), state in zip(played, states, strict=True):
        assert invariants.economy(sync_redis, small.keys, round_id, state, small.settings) == [], round_id
    # The wallet check reads one round's admissions: give it every round's (the ledger spans them all).
    every = dataclasses.replace(
        states[-1],
        submitted={ada.id: set().union(*(s.submitted[ada.id] for s in states))},
        records={k: v for s in states for k, v in s.records.items()},
    )
    assert invariants.wallets(sync_redis, small.keys, every, rows) == []
    last = played[-1][0]
    forged = {"at": 1, "currency": "ticket", "delta": 1, "balance": 3, "reason": "allowance", "job": ""}
    sync_redis.rpush(small.keys.ledger(ada.id), json.dumps({**forged, "round": last}))
    sync_redis.hincrby(small.keys.wallet(ada.id), "ticket", 1)
    state = invariants.read_game(sync_redis, small.keys, last, [ada.id])
    problems = invariants.economy(sync_redis, small.keys, last, state, small.settings)
    assert any("allowance" in p for p in problems)


async def test_a_caller_cannot_write_a_carry(game, player):
    """``carry`` is the scripts' own reason: a credit naming it is refused and changes nothing."""
    for reason in ("carry", "carried"):
        with pytest.raises(InvalidOption):
            await wallet.credit(game, player.id, "coin", 5, reason=reason)
    held = await wallet.read_wallet(game, player.id)
    assert held.balances == {}
    assert held.ledger == ()


async def test_operator_credits_keep_the_ledger_bounded(small, sync_redis):
    """Credits alone (no guess at all) trim too: the ledger stays under the cap plus one entry, every
    credit's effect is kept, and a retried credit (same operation) neither credits nor trims again."""
    ada = await players.register(small, "Ada")
    for number in range(1, 51):
        await wallet.credit(small, ada.id, "coin" if number % 3 else "ticket", number, reason="prize")
        assert sync_redis.llen(small.keys.ledger(ada.id)) <= CAP
    held = await wallet.read_wallet(small, ada.id)
    coins = sum(n for n in range(1, 51) if n % 3)
    assert held.balances == {"coin": coins, "ticket": 1275 - coins}
    assert wallet.reconcile(held) == []
    operation = ids.mint(OPERATION)
    await wallet.credit(small, ada.id, "coin", 7, reason="prize", operation=operation)
    before = entries(sync_redis, small, ada.id)
    await wallet.credit(small, ada.id, "coin", 7, reason="prize", operation=operation)
    assert entries(sync_redis, small, ada.id) == before

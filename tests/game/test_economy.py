"""The economy: nothing at sign-up, a per-round allowance topped up (not added) at a player's first
admitted guess of a round, and a reward for solving, each once per (player, round) whatever the
retries, the concurrency or the delivery order; every credit in the ledger, and every wallet reconciles.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from codemojex import economy, guesses, offers, players, refunds, rounds, wallet
from codemojex.conformance import invariants
from codemojex.engine import score
from codemojex.errors import InvalidOption
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome, Refusal
from codemojex.payload import decode_payload
from codemojex.score_worker import score_call
from echomq import Bus
from tests.support.game import KEYBOARD, SECRET, text

MISS = text(("🍍", "🍍", "🍍", "🍍", "🍍", "🍍"))  # no 🍍 in the secret: six misses
LEVEL = {"ticket": 3, "coin": 50}  # the default allowance
PER_ROUND = 3 + 50 // 5  # guesses a broke player can pay in a round at ticket=1 else coin=5


def ledger(sync_redis, game, player_id):
    return [json.loads(raw) for raw in sync_redis.lrange(game.keys.ledger(player_id), 0, -1)]


def credits_of(entries, reason):
    return [(e["currency"], e["delta"], e.get("round", "")) for e in entries if e["reason"] == reason]


async def new_round(game: Game) -> rounds.Round:
    return await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))


async def score_claimed(game: Game, count: int) -> list[str]:
    """Claim ``count`` jobs and score each with score.lua as the worker would; their JOB ids."""
    claims = await game.bus.claim(count, lease_ms=60_000)
    for claim in claims:
        request = decode_payload(claim.payload)
        await game.run("score", *score_call(game, claim, request, score(SECRET, request.guess)))
    return [claim.job for claim in claims]


async def test_a_new_player_starts_with_nothing_and_the_first_guess_tops_up(game, the_round, sync_redis):
    """Sign-up grants nothing; the first admitted guess of the round tops the wallet up to the allowance
    (one `allowance` entry per currency, naming the round), then charges it, in one atomic step."""
    ada = await players.register(game, "Ada")
    assert (await wallet.read_wallet(game, ada.id)).balances == {}
    submitted = await guesses.submit(game, the_round.id, ada.id, MISS)
    assert submitted.outcome is Outcome.ADMITTED
    assert submitted.charged == ("ticket", 1)
    entries = ledger(sync_redis, game, ada.id)
    assert [(e["reason"], e["currency"], e["delta"]) for e in entries] == [
        ("allowance", "ticket", 3),
        ("allowance", "coin", 50),
        ("guess", "ticket", -1),
    ]
    assert {e.get("round") for e in entries} == {the_round.id}
    held = await wallet.read_wallet(game, ada.id)
    assert held.balances == {"coin": 50, "ticket": 2}
    assert wallet.reconcile(held) == []


async def test_the_allowance_tops_up_and_never_adds(game, player, sync_redis):
    """In a later round only what is missing up to the level is credited; above the level, nothing."""
    first, second, third = await new_round(game), await new_round(game), await new_round(game)
    await guesses.submit(game, first.id, player.id, MISS)  # 3 tickets, 50 coins, then 2 tickets
    await guesses.submit(game, second.id, player.id, MISS)  # +1 ticket: 3, then 2
    assert credits_of(ledger(sync_redis, game, player.id), "allowance")[-1] == ("ticket", 1, second.id)
    await wallet.credit(game, player.id, "coin", 30, reason="prize")
    await wallet.credit(game, player.id, "ticket", 4, reason="prize")
    await guesses.submit(game, third.id, player.id, MISS)  # 6 tickets and 80 coins: above the level
    assert [c for c in credits_of(ledger(sync_redis, game, player.id), "allowance") if c[2] == third.id] == []
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 80, "ticket": 5}
    assert sync_redis.hexists(game.keys.allowances(third.id), player.id)


async def test_a_broke_player_is_refused_then_refilled_by_the_next_round(game, the_round, player):
    """A round's allowance pays 13 guesses; the 14th is refused (nothing changes); the next round's first
    guess is admitted with a fresh top-up."""
    for _ in range(PER_ROUND):
        assert (await guesses.submit(game, the_round.id, player.id, MISS)).outcome is Outcome.ADMITTED
    before = await wallet.read_wallet(game, player.id)
    refused = await guesses.submit(game, the_round.id, player.id, MISS)
    assert refused.refusal is Refusal.INSUFFICIENT_FUNDS
    assert await wallet.read_wallet(game, player.id) == before
    following = await new_round(game)
    again = await guesses.submit(game, following.id, player.id, MISS)
    assert (again.outcome, again.charged) == (Outcome.ADMITTED, ("ticket", 1))
    held = await wallet.read_wallet(game, player.id)
    assert held.balances == {"coin": 50, "ticket": 2}
    assert wallet.reconcile(held) == []


async def test_a_retried_first_guess_tops_up_once(game, the_round, player, sync_redis):
    """The same job submitted again (a lost reply), or its submit.lua call run twice: one allowance."""
    first = await guesses.submit(game, the_round.id, player.id, MISS)
    again = await guesses.submit(game, the_round.id, player.id, MISS, job_id=first.job)
    assert again.outcome is Outcome.DUPLICATE
    digest = guesses.request_digest(the_round.id, player.id, MISS)
    call = guesses.submit_call(game, first.job, the_round.id, player.id, ("🍍",) * 6, digest=digest)
    reply = await game.run("submit", *call)
    assert int(reply[0]) == 0  # duplicate
    assert len(credits_of(ledger(sync_redis, game, player.id), "allowance")) == 2  # ticket and coin, once
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 50, "ticket": 2}


async def test_concurrent_first_guesses_get_one_allowance(
    redis_server, tag, game, the_round, player, sync_redis
):
    """40 concurrent first guesses of one player over 8 connections: one top-up, 13 admitted."""
    clients = [Game(Bus.from_url(redis_server.url, tag=tag)) for _ in range(8)]
    try:
        results = await asyncio.gather(
            *(guesses.submit(clients[n % 8], the_round.id, player.id, MISS) for n in range(40))
        )
    finally:
        for client in clients:
            await client.aclose()
    assert sum(r.outcome is Outcome.ADMITTED for r in results) == PER_ROUND
    assert credits_of(ledger(sync_redis, game, player.id), "allowance") == [
        ("ticket", 3, the_round.id),
        ("coin", 50, the_round.id),
    ]
    held = await wallet.read_wallet(game, player.id)
    assert held.balances == {"coin": 0, "ticket": 0}
    assert wallet.reconcile(held) == []


async def test_a_refused_first_guess_takes_no_allowance(game, player, sync_redis):
    """A guess refused (the round closed, the guess limit) changes nothing, the allowance included."""
    the_round = await new_round(game)
    await rounds.close_round(game, the_round.id)
    refused = await guesses.submit(game, the_round.id, player.id, MISS)
    assert refused.refusal is Refusal.ROUND_CLOSED
    assert ledger(sync_redis, game, player.id) == []
    assert not sync_redis.hexists(game.keys.allowances(the_round.id), player.id)


async def test_a_refunded_first_guess_keeps_the_allowance_once(game, the_round, player, sync_redis):
    """The first guess dies and is refunded its ticket: the allowance stays (not taken back, not given
    again at the next guess), the wallet is back at the level, and the ledger reconciles."""
    first = await guesses.submit(game, the_round.id, player.id, MISS)
    [claim] = await game.bus.claim(1, lease_ms=60_000)
    await game.bus.fail(claim, "boom", retryable=False)
    [result] = await refunds.refund(game, [first.job])
    assert result.outcome is refunds.Refund.REFUNDED
    assert (await wallet.read_wallet(game, player.id)).balances == LEVEL
    second = await guesses.submit(game, the_round.id, player.id, MISS)
    assert second.charged == ("ticket", 1)
    assert len(credits_of(ledger(sync_redis, game, player.id), "allowance")) == 2
    held = await wallet.read_wallet(game, player.id)
    assert held.balances == {"coin": 50, "ticket": 2}
    assert wallet.reconcile(held) == []


async def test_a_solve_is_rewarded_once_whatever_the_delivery(game, the_round, player, sync_redis):
    """Two solving guesses, the later-admitted scored first, each scored twice (a redelivery): one
    `reward` entry for the round; a guess that does not solve earns nothing."""
    await guesses.submit(game, the_round.id, player.id, MISS)
    await score_claimed(game, 1)
    assert credits_of(ledger(sync_redis, game, player.id), "reward") == []
    early = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    late = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    [claim_early, claim_late] = await game.bus.claim(2, lease_ms=60_000)
    assert (claim_early.job, claim_late.job) == (early.job, late.job)
    for claim in (claim_late, claim_early, claim_late):
        request = decode_payload(claim.payload)
        await game.run("score", *score_call(game, claim, request, score(SECRET, request.guess)))
    assert credits_of(ledger(sync_redis, game, player.id), "reward") == [("coin", 25, the_round.id)]
    held = await wallet.read_wallet(game, player.id)
    assert held.balances["coin"] == 50 + 25
    assert wallet.reconcile(held) == []
    assert sync_redis.hexists(game.keys.rewards(the_round.id), player.id)


async def test_a_throwaway_account_is_never_better_off_than_the_account_it_replaces(
    game, the_round, sync_redis
):
    """After its first guess a new account holds exactly the allowance less the price, as an old broke
    account does at its first guess of a round; an account above the level keeps its surplus."""
    old = await players.register(game, "Old")
    for _ in range(PER_ROUND):
        await guesses.submit(game, the_round.id, old.id, MISS)
    following = await new_round(game)
    throwaway = await players.register(game, "Throwaway")
    assert (await wallet.read_wallet(game, throwaway.id)).balances == {}
    await guesses.submit(game, following.id, old.id, MISS)
    await guesses.submit(game, following.id, throwaway.id, MISS)
    old_held = await wallet.read_wallet(game, old.id)
    new_held = await wallet.read_wallet(game, throwaway.id)
    assert old_held.balances == new_held.balances == {"coin": 50, "ticket": 2}


async def test_no_caller_can_write_the_economy_s_own_entries(game, player):
    """wallet.credit refuses the reasons only the scripts write (allowance, reward): no forged refill."""
    for reason in ("allowance", "reward"):
        with pytest.raises(InvalidOption):
            await wallet.credit(game, player.id, "ticket", 1, reason=reason)
    assert (await wallet.read_wallet(game, player.id)).balances == {}


async def test_the_offer_says_what_the_next_guess_costs_and_what_the_round_gives(game, the_round, player):
    """Before the first guess: the top-up to come and its price; after it: taken; broke: no price, and
    what the next round's first guess will give."""
    offer = await offers.read_offer(game, the_round.id, player.id)
    assert offer.top_up == (("ticket", 3), ("coin", 50))
    assert (offer.taken, offer.next_price) == (False, ("ticket", 1))
    await guesses.submit(game, the_round.id, player.id, MISS)
    offer = await offers.read_offer(game, the_round.id, player.id)
    assert (offer.taken, offer.top_up, offer.next_price) == (True, (), ("ticket", 1))
    for _ in range(PER_ROUND - 1):
        await guesses.submit(game, the_round.id, player.id, MISS)
    offer = await offers.read_offer(game, the_round.id, player.id)
    assert offer.next_price is None
    assert offer.next_round_top_up == (("ticket", 3), ("coin", 50))


def test_the_pure_rule_tops_up_to_the_level():
    """top_up adds what is missing below each level, nothing above; next_price sees the top-up."""
    level = (("ticket", 3), ("coin", 50))
    assert economy.top_up(level, {"ticket": 1, "coin": 70}) == (("ticket", 2),)
    assert economy.top_up(level, {}) == level
    prices = (("ticket", 1), ("coin", 5))
    assert economy.next_price(prices, {}, level) == ("ticket", 1)
    assert economy.next_price(prices, {"coin": 4}, ()) is None


async def test_an_economy_off_game_grants_nothing_at_first_guess(redis_server, tag, sync_redis):
    """allowance=() and no reward: the scripts credit nothing (the proof's demo game plays so)."""
    settings = GameSettings(grant=(("coin", 10),), allowance=(), solve_reward=(), prices=(("coin", 5),))
    async with Game(Bus.from_url(redis_server.url, tag=tag), settings) as off:
        the_round = await new_round(off)
        ada = await players.register(off, "Ada")
        await guesses.submit(off, the_round.id, ada.id, text(SECRET))
        await score_claimed(off, 1)
        assert [e["reason"] for e in ledger(sync_redis, off, ada.id)] == ["grant", "guess"]


async def test_the_conformance_wallet_invariants_hold_and_catch_a_second_allowance(
    game, the_round, player, sync_redis
):
    """invariants.economy: each allowance and reward once per (player, round), as the markers say; a forged
    second allowance entry (and its balance) is found."""
    await guesses.submit(game, the_round.id, player.id, text(SECRET))
    await score_claimed(game, 1)
    rows = invariants.job_rows(sync_redis, game.bus.keys)
    state = invariants.read_game(sync_redis, game.keys, the_round.id, [player.id])
    assert invariants.wallets(sync_redis, game.keys, state, rows) == []
    assert invariants.economy(sync_redis, game.keys, the_round.id, state, game.settings) == []
    forged = {
        "at": 1,
        "currency": "ticket",
        "delta": 3,
        "balance": 5,
        "reason": "allowance",
        "job": "",
        "round": the_round.id,
    }
    sync_redis.rpush(game.keys.ledger(player.id), json.dumps(forged))
    sync_redis.hincrby(game.keys.wallet(player.id), "ticket", 3)
    problems = invariants.economy(sync_redis, game.keys, the_round.id, state, game.settings)
    assert any("allowance" in p for p in problems)

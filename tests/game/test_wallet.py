"""The wallet: never negative, every debit and credit in the ledger, refusals charge nothing."""

from __future__ import annotations

import asyncio

import pytest

from codemojex import economy, guesses, players, wallet
from codemojex.errors import InvalidOption, UnknownPlayer
from codemojex.game import Game, GameSettings
from codemojex.guesses import Outcome, Refusal
from echomq import Bus, ids
from tests.support.game import text

GUESS = text(("🍎", "🍌", "🍇", "🍒", "🥝", "🍑"))
AFFORDABLE = 3 + 50 // 5  # the round's allowance pays 3 guesses in tickets, then 10 in coins


async def test_a_new_player_gets_nothing_at_sign_up(game, player):
    """No grant (the economy: a round's allowance comes with the first guess of the round)."""
    held = await wallet.read_wallet(game, player.id)
    assert (held.balances, held.ledger) == ({}, ())
    assert wallet.reconcile(held) == []


async def test_a_configured_grant_is_credited_with_ledger_entries(redis_server, tag):
    """A game that grants 3 tickets and 50 coins: each credit a ledger entry with reason grant, no job."""
    settings = GameSettings(grant=(("ticket", 3), ("coin", 50)))
    async with Game(Bus.from_url(redis_server.url, tag=tag), settings) as granting:
        ada = await players.register(granting, "Ada")
        held = await wallet.read_wallet(granting, ada.id)
    assert held.balances == {"coin": 50, "ticket": 3}
    assert [(e.currency, e.delta, e.reason, e.job) for e in held.ledger] == [
        ("ticket", 3, "grant", ""),
        ("coin", 50, "grant", ""),
    ]
    assert wallet.reconcile(held) == []


async def test_charges_follow_the_price_list_in_order_of_preference(game, the_round, player):
    """Tickets while there are tickets, then coins; then insufficient funds, which charges nothing."""
    charged = []
    for _ in range(AFFORDABLE):
        submission = await guesses.submit(game, the_round.id, player.id, GUESS)
        assert submission.outcome is Outcome.ADMITTED
        charged.append(submission.charged)
    assert charged == [("ticket", 1)] * 3 + [("coin", 5)] * 10
    refused = await guesses.submit(game, the_round.id, player.id, GUESS)
    assert refused.refusal is Refusal.INSUFFICIENT_FUNDS
    assert refused.charged is None
    held = await wallet.read_wallet(game, player.id)
    assert held.balances == {"coin": 0, "ticket": 0}
    assert len(held.ledger) == 2 + AFFORDABLE  # the allowance's two top-ups, then the guesses
    assert wallet.reconcile(held) == []


async def test_concurrent_submits_from_many_clients_never_overdraw(
    redis_server, tag, game, the_round, game_probe
):
    """200 concurrent submits from 8 connections per player: exactly the affordable ones are admitted."""
    buyers = [await players.register(game, f"buyer {n}") for n in range(5)]
    clients = [Game(Bus.from_url(redis_server.url, tag=tag)) for _ in range(8)]
    try:
        results = await asyncio.gather(
            *(
                guesses.submit(clients[n % len(clients)], the_round.id, buyer.id, GUESS)
                for buyer in buyers
                for n in range(40)
            )
        )
    finally:
        for client in clients:
            await client.aclose()
    for buyer in buyers:
        mine = [r for r in results if r.job and game_probe.ledger_jobs(buyer.id).count(r.job)]
        assert len(mine) == AFFORDABLE
        held = await wallet.read_wallet(game, buyer.id)
        assert held.balances == {"coin": 0, "ticket": 0}
        assert wallet.reconcile(held) == []
        assert len(set(game_probe.ledger_jobs(buyer.id))) == AFFORDABLE  # each admitted job debited once
    admitted = [r for r in results if r.outcome is Outcome.ADMITTED]
    refused = [r for r in results if r.outcome is Outcome.REFUSED]
    assert len(admitted) == AFFORDABLE * len(buyers)
    assert {r.refusal for r in refused} == {Refusal.INSUFFICIENT_FUNDS}
    assert game_probe.bus.counters()["admitted"] == len(admitted)


async def test_credit_appends_to_the_ledger_and_refuses_bad_input(game, player):
    """A credit names its reason and job; a bad currency, amount, reason (or one the game reserves for
    its own entries: guess, refund, recharge) or player changes nothing."""
    job = ids.mint("JOB")
    assert await wallet.credit(game, player.id, "coin", 7, reason="prize", job=job) == 7
    held = await wallet.read_wallet(game, player.id)
    assert (held.ledger[-1].delta, held.ledger[-1].reason, held.ledger[-1].job) == (7, "prize", job)
    for bad in [
        lambda: wallet.credit(game, player.id, "Coin", 1),
        lambda: wallet.credit(game, player.id, "coin", 0),
        lambda: wallet.credit(game, player.id, "coin", -5),
        lambda: wallet.credit(game, player.id, "coin", True),
        lambda: wallet.credit(game, player.id, "coin", 1, reason="no spaces allowed"),
        lambda: wallet.credit(game, player.id, "coin", 1, reason="refund", job=job),
        lambda: wallet.credit(game, player.id, "coin", 1, reason="recharge", job=job),
        lambda: wallet.credit(game, player.id, "coin", 1, reason="guess", job=job),
    ]:
        with pytest.raises(InvalidOption):
            await bad()
    with pytest.raises(UnknownPlayer):
        await wallet.credit(game, ids.mint("PLR"), "coin", 1)
    assert (await wallet.read_wallet(game, player.id)).balances == {"coin": 7}


def test_reconcile_finds_a_ledger_that_does_not_add_up():
    """reconcile() reports a balance the ledger does not give, and a negative running balance."""
    entry = wallet.LedgerEntry(0, "coin", -5, -5, "guess", "")
    broken = wallet.Wallet("PLR", {"coin": 3}, (entry,))
    problems = wallet.reconcile(broken)
    assert any("went negative" in p for p in problems)
    assert any("coin: balance 3, ledger gives -5" in p for p in problems)


async def test_choose_price_matches_what_submit_charges(game: Game, the_round, player):
    """The pure choose_price (of the balances after the round's allowance) picks what submit.lua charges."""
    held = await wallet.read_wallet(game, player.id)
    topped = economy.after(held.balances, economy.top_up(game.settings.allowance, held.balances))
    expected = wallet.choose_price(the_round.prices, topped)
    submission = await guesses.submit(game, the_round.id, player.id, GUESS)
    assert submission.charged == expected == ("ticket", 1)
    assert wallet.choose_price(the_round.prices, {"coin": 4}) is None


async def test_a_partial_ledger_reconciles_from_the_balance_before_its_first_entry(game, the_round, player):
    """read_wallet(ledger_limit=2) holds the newest two entries; they still reconcile with the balances."""
    for _ in range(4):
        await guesses.submit(game, the_round.id, player.id, GUESS)
    tail = await wallet.read_wallet(game, player.id, ledger_limit=2)
    assert (len(tail.ledger), tail.ledger_total) == (2, 6)
    assert wallet.reconcile(tail) == []
    forged = wallet.Wallet(player.id, {**tail.balances, "coin": 99}, tail.ledger, tail.ledger_total)
    assert wallet.reconcile(forged) == ["coin: balance 99, ledger gives 45"]

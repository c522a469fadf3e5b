"""A call run twice, as a retry after a lost reply runs it (by the caller with the same operation id, or
by redis-py's own retry of the same command), applies once and answers the second time truthfully."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal

import pytest
from redis.asyncio import Redis

from codemojex import players, rounds, wallet
from codemojex.errors import InvalidOption, RoundClosed, Unavailable
from codemojex.game import Game, GameSettings, encode_prices
from codemojex.keys import PLAYER, ROUND
from codemojex.names import skeleton
from echomq import Bus, ids
from tests.support.game import KEYBOARD, SECRET


async def test_a_credit_retried_with_its_operation_id_applies_once(game, player):
    """The same operation credited twice adds once; both calls answer the balance it produced, and the
    ledger holds one entry naming the operation."""
    operation = ids.mint("OPR")
    first = await wallet.credit(game, player.id, "coin", 7, reason="prize", operation=operation)
    again = await wallet.credit(game, player.id, "coin", 7, reason="prize", operation=operation)
    assert first == again == 7  # a new player holds nothing (the economy)
    held = await wallet.read_wallet(game, player.id)
    assert held.balances["coin"] == 7
    assert [entry.operation for entry in held.ledger if entry.reason == "prize"] == [operation]
    assert wallet.reconcile(held) == []


async def test_an_operation_id_reused_for_another_credit_is_refused(game, player):
    """One operation id names one credit: another amount under it changes nothing and raises."""
    operation = ids.mint("OPR")
    await wallet.credit(game, player.id, "coin", 7, operation=operation)
    with pytest.raises(InvalidOption):
        await wallet.credit(game, player.id, "coin", 8, operation=operation)
    assert (await wallet.read_wallet(game, player.id)).balances["coin"] == 7


async def test_credits_without_an_operation_id_are_each_their_own(game, player):
    """Two calls that name no operation are two credits (each call mints its own id)."""
    await wallet.credit(game, player.id, "coin", 1)
    assert await wallet.credit(game, player.id, "coin", 1) == 2


async def test_a_close_retried_with_its_operation_id_answers_its_own_close(game):
    """The same close run twice answers the same close time both times; another close answers
    RoundClosed."""
    the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
    operation = ids.mint("OPR")
    first = await rounds.close_round(game, the_round.id, operation=operation)
    assert await rounds.close_round(game, the_round.id, operation=operation) == first
    with pytest.raises(RoundClosed):
        await rounds.close_round(game, the_round.id)


async def test_a_registration_run_twice_grants_once_and_answers_registered(redis_server, tag):
    """register.lua run twice with the same id and arguments: one player, one grant, both answers 1
    with the same time; the same id with another name answers 0."""
    game = Game(Bus.from_url(redis_server.url, tag=tag), GameSettings(grant=(("ticket", 3), ("coin", 50))))
    player_id = ids.mint(PLAYER)
    digest = players.token_digest(players.new_token())
    call_keys = players.register_keys(game, player_id, digest)
    lifetime = game.settings.token_lifetime_ms
    args = [player_id, "Ada", encode_prices(game.settings.grant), digest, skeleton("Ada"), lifetime, 1000]
    first = await game.run("register", call_keys, args)
    again = await game.run("register", call_keys, args)
    assert (int(first[0]), int(again[0])) == (1, 1)
    assert int(first[1]) == int(again[1])
    other = await game.run("register", call_keys, [player_id, "Eve", *args[2:4], skeleton("Eve"), *args[5:]])
    assert int(other[0]) == 0
    held = await wallet.read_wallet(game, player_id)
    assert held.balances == {"coin": 50, "ticket": 3}
    assert len(held.ledger) == 2
    await game.aclose()


async def test_a_retried_registration_keeps_its_name_and_another_id_is_refused_it(game, game_probe):
    """The retry of a registration finds the name held by its own id and answers registered; a new
    registration (another id) of a look-alike name answers -2 and changes nothing."""
    player_id = ids.mint(PLAYER)
    lifetime = game.settings.token_lifetime_ms
    args = [player_id, "Bob", encode_prices(game.settings.grant), "", skeleton("Bob"), lifetime, 1000]
    first = await game.run("register", players.register_keys(game, player_id), args)
    again = await game.run("register", players.register_keys(game, player_id), args)
    assert (int(first[0]), int(again[0])) == (1, 1)
    assert await game.redis.hget(game.keys.names, "bob") == player_id.encode()
    before = game_probe.snapshot()
    other = ids.mint(PLAYER)
    look_alike = [other, "B0B", args[2], "", skeleton("B0B"), lifetime, 1000]
    assert int((await game.run("register", players.register_keys(game, other), look_alike))[0]) == -2
    assert game_probe.snapshot() == before


async def test_an_open_run_twice_makes_one_round_and_answers_opened(game):
    """open_round.lua run twice with the same id and arguments: one round, the first open time both
    times; the same id with another secret answers 0."""
    round_id = ids.mint(ROUND)
    keys = game.keys
    call_keys = [keys.round(round_id), keys.secret(round_id), keys.rounds, keys.live]
    secret = json.dumps(list(SECRET), ensure_ascii=False)
    args = [round_id, json.dumps(list(KEYBOARD), ensure_ascii=False), 6, "ticket=1", 0, 0, 0, secret]
    first = await game.run("open_round", call_keys, args)
    again = await game.run("open_round", call_keys, args)
    assert (int(first[0]), int(again[0])) == (1, 1)
    assert int(first[1]) == int(again[1])
    other = await game.run("open_round", call_keys, [*args[:7], json.dumps([KEYBOARD[0]] * 6)])
    assert int(other[0]) == 0
    assert (await rounds.get_round(game, round_id)).opens_ms == int(first[1])
    assert await game.redis.zcard(keys.rounds) >= 1


@pytest.mark.slow
async def test_calls_whose_reply_is_lost_on_a_paused_server_apply_once_and_answer_truthfully(
    fresh_server, tag
):
    """With the server stopped (SIGSTOP) longer than the client's socket timeout, a credit and a close
    time out (redis-py may send them again meanwhile) and every copy runs when the server resumes; the
    caller's retry with the same operation id then answers the first run's result: one credit, and the
    close time rather than RoundClosed."""
    setup = Game(Bus.from_url(fresh_server.url, tag=tag))
    game = Game(Bus(Redis.from_url(fresh_server.url, socket_timeout=0.5), tag=tag))
    try:
        the_round = await rounds.open_round(setup, keyboard=list(KEYBOARD), secret=list(SECRET))
        ada = await players.register(setup, "Ada")
        await game.redis.ping()  # connected before the pause
        credit_op, close_op = ids.mint("OPR"), ids.mint("OPR")
        answers = []
        for call in (
            lambda: wallet.credit(game, ada.id, "coin", 5, reason="prize", operation=credit_op),
            lambda: rounds.close_round(game, the_round.id, operation=close_op),
        ):
            assert fresh_server.process is not None
            fresh_server.process.send_signal(signal.SIGSTOP)
            try:
                pending = asyncio.ensure_future(call())
                await asyncio.sleep(0.8)  # the first send times out (0.5 s); redis-py may send it again
            finally:
                fresh_server.process.send_signal(signal.SIGCONT)
            with contextlib.suppress(Unavailable):  # a lost reply, or redis-py's retry got one
                await asyncio.wait_for(pending, 30)
            answers.append(await call())  # the caller's own retry of the same operation
        assert answers[0] == 5
        assert answers[1] == (await rounds.get_round(setup, the_round.id)).closed_ms
        held = await wallet.read_wallet(setup, ada.id)
        assert [entry.delta for entry in held.ledger if entry.reason == "prize"] == [5]
        assert held.balances == {"coin": 5}
        assert wallet.reconcile(held) == []
    finally:
        await game.aclose()
        await setup.aclose()

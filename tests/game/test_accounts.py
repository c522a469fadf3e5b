"""Accounts and tokens, on a real Redis: token lifetime, rotation (a lost reply retried), revocation,
legacy tokens, players who never played expiring whole, and that expiry racing a first guess.

Time is moved forward as the probes do elsewhere: a player's trial is made due by setting its score in
``trial`` to 0 (the sweep compares it with the server clock), never by sleeping.
"""

from __future__ import annotations

import asyncio

import pytest

from codemojex import guesses, players, rounds, tokens, trials, wallet
from codemojex.errors import NameTaken, UnknownPlayer
from codemojex.game import DAY_MS, Game
from codemojex.guesses import Outcome
from codemojex.names import skeleton
from tests.support.game import KEYBOARD, SECRET, text

GOOD = text(SECRET)


def game_keys(sync_redis, game: Game) -> set[bytes]:
    return set(sync_redis.scan_iter(match=game.keys.pattern, count=1000))


def age(sync_redis, game: Game, *player_ids: str) -> None:
    """Make the players' trials due, as if ``trial_ms`` had passed since they joined (the end of a
    trial is its score: 0 is long past)."""
    for player_id in player_ids:
        assert sync_redis.zadd(game.keys.trial, {player_id: 0}, xx=True, ch=True) == 1


async def test_a_token_has_its_own_key_that_ends_after_the_lifetime(game, sync_redis):
    token = players.new_token()
    ada = await players.register(game, "Ada", token=token)
    key = game.keys.token(players.token_digest(token))
    assert sync_redis.get(key) == ada.id.encode()
    assert 29 * DAY_MS < sync_redis.pttl(key) <= 30 * DAY_MS  # the documented lifetime, absolute
    assert not sync_redis.exists(game.keys.tokens)  # no ever-growing hash
    assert await tokens.authenticate(game, token) == ada.id
    sync_redis.delete(key)  # what Redis does when the lifetime is over
    assert await tokens.authenticate(game, token) is None


async def test_rotation_revokes_the_old_token_and_the_new_one_works(game, sync_redis):
    old = players.new_token()
    ada = await players.register(game, "Ada", token=old)
    issued = await tokens.rotate(game, old)
    assert issued is not None
    assert issued.player_id == ada.id
    assert issued.token != old
    assert await tokens.authenticate(game, old) is None
    assert await tokens.authenticate(game, issued.token) == ada.id
    new_key = game.keys.token(players.token_digest(issued.token))
    assert 29 * DAY_MS < sync_redis.pttl(new_key) <= 30 * DAY_MS
    assert not sync_redis.exists(game.keys.token(players.token_digest(old)))
    assert sync_redis.hget(game.keys.player(ada.id), "token") == players.token_digest(issued.token).encode()
    assert issued.token.encode() not in sync_redis.get(game.keys.rotated(players.token_digest(old)))


async def test_a_rotation_retried_after_a_lost_reply_answers_the_same_new_token(game):
    old = players.new_token()
    ada = await players.register(game, "Ada", token=old)
    first = await tokens.rotate(game, old)
    again = await tokens.rotate(game, old)  # the client never saw the first reply
    assert first is not None
    assert again == first
    assert await tokens.authenticate(game, first.token) == ada.id
    assert await tokens.authenticate(game, old) is None
    # Once that token is no longer the player's (rotated on, or revoked), the old one replays nothing.
    third = await tokens.rotate(game, first.token)
    assert third is not None
    assert await tokens.rotate(game, old) is None
    assert await tokens.revoke(game, third.token) == ada.id
    assert await tokens.rotate(game, first.token) is None


async def test_the_rotation_script_run_twice_answers_the_first_runs_token(game):
    """redis-py's own retry of token.lua (same arguments, the first run landed) gets the sealed token
    that run stored, which opens to the token the caller minted."""
    old = players.new_token()
    ada = await players.register(game, "Ada", token=old)
    fresh = players.new_token()
    d_old, d_new = players.token_digest(old), players.token_digest(fresh)
    keys = game.keys
    call_keys = [keys.token(d_old), keys.rotated(d_old), keys.player(ada.id), keys.token(d_new), keys.tokens]
    call_keys.append(keys.sessions(ada.id))
    args = ["rotate", ada.id, d_old, d_new, tokens.seal(fresh, old), DAY_MS, tokens.REPLAY_MS]
    first = await game.run("token", call_keys, args)
    again = await game.run("token", call_keys, args)
    assert (int(first[0]), int(again[0])) == (1, 0)
    assert int(first[1]) == int(again[1])
    assert tokens.unseal(bytes(again[2]).decode(), old) == fresh
    assert await tokens.authenticate(game, fresh) == ada.id


async def test_logout_revokes_the_token(game, sync_redis):
    token = players.new_token()
    ada = await players.register(game, "Ada", token=token)
    assert await tokens.revoke(game, token) == ada.id
    assert await tokens.authenticate(game, token) is None
    assert await tokens.revoke(game, token) is None
    assert await tokens.rotate(game, token) is None
    assert sync_redis.hget(game.keys.player(ada.id), "token") is None
    assert await wallet.read_wallet(game, ada.id)  # the player stays: only the token is gone


async def test_a_legacy_token_is_read_and_migrated_to_a_key_with_a_lifetime(game, sync_redis):
    legacy = players.new_token()
    ada = await players.register(game, "Ada")  # a player with no token key
    digest = players.token_digest(legacy)
    sync_redis.hset(game.keys.tokens, digest, ada.id)  # as register.lua stored tokens before
    gone = players.token_digest(players.new_token())
    sync_redis.hset(game.keys.tokens, gone, "PLR00T4CA4BVWHAM7E401QCBQC")  # its player is gone
    assert await tokens.authenticate(game, legacy) == ada.id
    assert await tokens.migrate_legacy(game) == 2
    assert not sync_redis.exists(game.keys.tokens)
    assert 29 * DAY_MS < sync_redis.pttl(game.keys.token(digest)) <= 30 * DAY_MS
    assert not sync_redis.exists(game.keys.token(gone))
    assert await tokens.authenticate(game, legacy) == ada.id


async def test_a_legacy_token_can_be_rotated_and_revoked(game, sync_redis):
    legacy = players.new_token()
    ada = await players.register(game, "Ada")
    sync_redis.hset(game.keys.tokens, players.token_digest(legacy), ada.id)
    issued = await tokens.rotate(game, legacy)
    assert issued is not None
    assert await tokens.authenticate(game, legacy) is None
    assert not sync_redis.exists(game.keys.tokens)
    other = players.new_token()
    sync_redis.hset(game.keys.tokens, players.token_digest(other), ada.id)
    assert await tokens.revoke(game, other) == ada.id
    assert await tokens.authenticate(game, other) is None


async def test_a_player_who_never_played_is_deleted_whole_and_the_name_is_free(game, sync_redis):
    before = game_keys(sync_redis, game)
    token = players.new_token()
    ada = await players.register(game, "Ada", token=token)
    await wallet.credit(game, ada.id, "coin", 5, reason="prize")
    assert (await trials.expire_players(game)).expired == ()  # not due yet: kept
    age(sync_redis, game, ada.id)
    assert (await trials.expire_players(game)).expired == (ada.id,)
    assert game_keys(sync_redis, game) == before  # record, wallet, ledger, credits, token, name, zsets
    assert await tokens.authenticate(game, token) is None
    again = await players.register(game, "ADA")  # the name is free again
    assert again.name == "ADA"


async def test_a_sign_up_flood_leaves_no_keys_once_the_trials_are_over(game, sync_redis):
    before = game_keys(sync_redis, game)
    flood = [await players.register(game, f"bot{n}", token=players.new_token()) for n in range(300)]
    assert len(game_keys(sync_redis, game)) >= len(before) + 300 * 2  # record, token (no grant)
    age(sync_redis, game, *(player.id for player in flood))
    done = await trials.expire_players(game, limit=100)  # bounded per pass
    assert len(done.expired) == 100
    assert await trials.Expirer(game).run_pass() == 200  # the worker's pass repeats while full
    assert game_keys(sync_redis, game) == before
    assert sync_redis.zcard(game.keys.players) == 0
    assert not sync_redis.exists(game.keys.names)


async def test_a_player_who_guessed_stays(game, the_round, sync_redis):
    ada = await players.register(game, "Ada", token=players.new_token())
    assert (await guesses.submit(game, the_round.id, ada.id, GOOD)).outcome is Outcome.ADMITTED
    assert sync_redis.zscore(game.keys.trial, ada.id) is None  # the first admitted guess: permanent
    assert (await trials.expire_players(game)).checked == 0
    assert (await players.get_player(game, ada.id)).name == "Ada"


async def test_a_refused_guess_does_not_keep_a_player(game, sync_redis):
    later = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET), delay_s=3600)
    ada = await players.register(game, "Ada")
    refused = await guesses.submit(game, later.id, ada.id, GOOD)
    assert refused.outcome is Outcome.REFUSED
    age(sync_redis, game, ada.id)
    assert (await trials.expire_players(game)).expired == (ada.id,)


async def test_expiry_then_a_first_guess_charges_nothing_and_leaves_no_key(game, the_round, sync_redis):
    ada = await players.register(game, "Ada")
    age(sync_redis, game, ada.id)
    before = game_keys(sync_redis, game)
    await trials.expire_players(game)
    with pytest.raises(UnknownPlayer):
        await guesses.submit(game, the_round.id, ada.id, GOOD)
    after = game_keys(sync_redis, game)
    assert not {key for key in after - before if ada.id.encode() in key}
    assert not sync_redis.exists(game.bus.keys.lane(ada.id))


async def test_a_first_guess_then_expiry_keeps_the_player(game, the_round, sync_redis):
    ada = await players.register(game, "Ada")
    age(sync_redis, game, ada.id)  # due, but the guess comes first
    assert (await guesses.submit(game, the_round.id, ada.id, GOOD)).outcome is Outcome.ADMITTED
    assert (await trials.expire_players(game)).expired == ()
    assert (await wallet.read_wallet(game, ada.id)).balances == {"coin": 50, "ticket": 2}


async def test_expiry_racing_first_guesses_leaves_whole_players_or_none(game, the_round, sync_redis):
    """Many due players, each guessing while the sweep runs: each is either kept with their guess
    charged once, or gone with nothing of theirs left and the guess refused."""
    field = [await players.register(game, f"p{n}", token=players.new_token()) for n in range(60)]
    age(sync_redis, game, *(player.id for player in field))

    async def guess(player_id: str) -> bool:
        try:
            return (await guesses.submit(game, the_round.id, player_id, GOOD)).outcome is Outcome.ADMITTED
        except UnknownPlayer:
            return False

    sweep = asyncio.create_task(trials.expire_players(game, limit=1000))
    admitted = await asyncio.gather(*(guess(player.id) for player in field))
    expired = set((await sweep).expired)
    for player, kept in zip(field, admitted, strict=True):
        assert kept == (player.id not in expired)
        mine = [key for key in game_keys(sync_redis, game) if player.id.encode() in key]
        if kept:
            held = await wallet.read_wallet(game, player.id)
            assert held.balances == {"coin": 50, "ticket": 2}
            assert wallet.reconcile(held) == []
        else:
            assert mine == []
            assert sync_redis.hget(game.keys.names, skeleton(player.name)) is None


async def test_a_taken_name_comes_with_a_free_suggestion(game):
    await players.register(game, "Bob")
    await players.register(game, "Bob 2")
    with pytest.raises(NameTaken) as taken:
        await players.register(game, "B0B")
    suggestion = taken.value.suggestion
    assert suggestion is not None
    assert suggestion.startswith("B0B ")
    assert suggestion != "B0B 2"
    assert (await players.register(game, suggestion)).name == suggestion


async def test_names_of_players_from_before_reservations_are_reserved_by_the_backfill(game, sync_redis):
    """An upgrade: players registered before names were reserved hold no skeleton; the backfill
    reserves each (the first of two look-alikes keeps it), after which a look-alike is refused."""
    old = await players.register(game, "Olga")
    later = await players.register(game, "Zed")
    sync_redis.hset(game.keys.player(later.id), "name", "0lga")  # a look-alike, refused today
    for player in (old, later):
        sync_redis.hdel(game.keys.player(player.id), "skeleton")
    sync_redis.delete(game.keys.names)
    assert await players.backfill_names(game) == 1
    assert sync_redis.hget(game.keys.names, skeleton("Olga")) == old.id.encode()
    assert await players.backfill_names(game) == 0  # safe to repeat
    with pytest.raises(NameTaken):
        await players.register(game, "OLGA")

"""Recovery codes on a real Redis: a code is shown once and stored as a digest, a new one revokes the
old, it trades for a token on another device (the first device's token still works, unless the player
signs out everywhere else), a wrong code, a wrong name and an unknown player are one answer, a lost
reply is safe, and a player deleted whole takes the code and every session along."""

from __future__ import annotations

import pytest

from codemojex import players, recovery, tokens, trials
from codemojex.errors import InvalidOption, UnknownPlayer
from codemojex.game import DAY_MS, Game
from echomq import ids


async def ada(game: Game) -> tuple[players.Player, str]:
    token = players.new_token()
    return await players.register(game, "Ada", token=token), token


def test_a_code_has_100_bits_in_four_groups_and_forgives_typing():
    """Crockford base32, 20 characters; case, spaces, dashes and O/I/L do not matter."""
    code = recovery.new_code()
    assert len(code) == 23
    assert code.count("-") == 3
    assert all(c in recovery.ALPHABET for c in code.replace("-", ""))
    assert len(recovery.ALPHABET) ** recovery.LENGTH == 2**100
    messy = " " + code.lower().replace("-", " ").replace("0", "o").replace("1", "l") + " "
    assert recovery.code_digest(messy) == recovery.code_digest(code)
    for bad in ("", "short", "U" * 20, code + "X", 12, None):
        with pytest.raises(InvalidOption):
            recovery.normalise(bad)


async def test_a_code_is_stored_as_its_digest_only(game, sync_redis):
    player, _ = await ada(game)
    code = await recovery.issue(game, player.id)
    digest = recovery.code_digest(code)
    assert sync_redis.get(game.keys.recovery(digest)) == player.id.encode()
    assert sync_redis.hget(game.keys.player(player.id), "recovery") == digest.encode()
    assert sync_redis.pttl(game.keys.recovery(digest)) == -1  # lasts as long as the player
    for key in sync_redis.scan_iter(match=game.keys.pattern):
        kind = sync_redis.type(key)
        if kind == b"string":
            assert code.encode() not in sync_redis.get(key)
        elif kind == b"hash":
            assert all(code.encode() not in value for value in sync_redis.hgetall(key).values())
    assert await recovery.has_code(game, player.id)


async def test_the_code_trades_for_a_token_and_the_other_device_keeps_its_own(game):
    player, first = await ada(game)
    code = await recovery.issue(game, player.id)
    signed = await recovery.sign_in(game, code)
    assert signed is not None
    assert signed.player_id == player.id
    assert signed.token != first
    assert await tokens.authenticate(game, signed.token) == player.id
    assert await tokens.authenticate(game, first) == player.id, "the first device still plays"
    again = await recovery.sign_in(game, code.lower(), name="ada")
    assert again is not None
    assert again.player_id == player.id, "the code is kept: it works again"


async def test_signing_out_everywhere_else_revokes_every_other_token(game):
    player, first = await ada(game)
    code = await recovery.issue(game, player.id)
    second = await recovery.sign_in(game, code)
    assert second is not None
    third = await recovery.sign_in(game, code, everywhere_else=True)
    assert third is not None
    assert await tokens.authenticate(game, first) is None
    assert await tokens.authenticate(game, second.token) is None
    assert await tokens.authenticate(game, third.token) == player.id


async def test_a_new_code_revokes_the_old_one(game, sync_redis):
    player, _ = await ada(game)
    old = await recovery.issue(game, player.id)
    new = await recovery.issue(game, player.id)
    assert new != old
    assert await recovery.sign_in(game, old) is None
    assert not sync_redis.exists(game.keys.recovery(recovery.code_digest(old)))
    assert await recovery.sign_in(game, new) is not None


async def test_a_wrong_code_a_wrong_name_and_an_unknown_player_are_one_answer_and_change_nothing(
    game, sync_redis
):
    player, _ = await ada(game)
    code = await recovery.issue(game, player.id)
    before = sorted(sync_redis.scan_iter(match=game.keys.pattern))
    assert await recovery.sign_in(game, recovery.new_code()) is None
    assert await recovery.sign_in(game, code, name="Bob") is None
    assert await recovery.sign_in(game, recovery.new_code(), name="Nobody") is None
    assert sorted(sync_redis.scan_iter(match=game.keys.pattern)) == before
    with pytest.raises(UnknownPlayer):
        await recovery.issue(game, ids.mint("PLR"))


async def test_a_lost_sign_in_reply_leaves_an_orphan_token_and_the_retry_gets_another(game, sync_redis):
    """The client never saw the first token: its retry gets a second one; both name the player, the
    orphan is bounded by the session cap (and its lifetime)."""
    player, _ = await ada(game)
    code = await recovery.issue(game, player.id)
    lost = await recovery.sign_in(game, code)
    retry = await recovery.sign_in(game, code)
    assert lost is not None
    assert retry is not None
    assert lost.token != retry.token
    sessions = game.keys.sessions(player.id)
    assert sync_redis.zcard(sessions) == 2
    assert 29 * DAY_MS < sync_redis.pttl(sessions) <= 30 * DAY_MS
    for _ in range(recovery.MAX_SESSIONS + 3):
        assert await recovery.sign_in(game, code) is not None
    assert sync_redis.zcard(sessions) == recovery.MAX_SESSIONS, "a retry storm keeps the tokens bounded"
    assert await tokens.authenticate(game, lost.token) is None, "the oldest session was revoked"


async def test_a_replayed_script_call_answers_the_same_token_end(game, sync_redis):
    """redis-py's own retry (same arguments) binds nothing twice."""
    player, _ = await ada(game)
    code = await recovery.issue(game, player.id)
    token = players.new_token()
    digest = recovery.code_digest(code)
    keys = game.keys
    call = (
        [
            keys.player(player.id),
            keys.recovery(digest),
            keys.recovery(digest),
            keys.token(players.token_digest(token)),
            keys.sessions(player.id),
        ],
        ["signin", player.id, players.token_digest(token), digest, "", "0", DAY_MS, 10],
    )
    first = await game.run("recovery", *call)
    second = await game.run("recovery", *call)
    assert int(first[0]) == int(second[0]) == 1
    assert abs(int(first[1]) - int(second[1])) < 1000
    assert sync_redis.zcard(keys.sessions(player.id)) == 1


async def test_a_session_token_rotates_and_logs_out_like_any_token(game, sync_redis):
    player, first = await ada(game)
    code = await recovery.issue(game, player.id)
    signed = await recovery.sign_in(game, code)
    assert signed is not None
    rotated = await tokens.rotate(game, signed.token)
    assert rotated is not None
    replay = await tokens.rotate(game, signed.token)
    assert replay is not None
    assert replay.token == rotated.token, "a lost rotation reply replays"
    assert await tokens.authenticate(game, first) == player.id, "the record's token is untouched"
    sessions = game.keys.sessions(player.id)
    assert sync_redis.zscore(sessions, players.token_digest(rotated.token)) is not None
    assert await tokens.revoke(game, rotated.token) == player.id
    assert sync_redis.zcard(sessions) == 0
    assert await tokens.authenticate(game, first) == player.id


async def test_a_player_deleted_whole_takes_the_code_and_the_sessions(game, sync_redis):
    player, _ = await ada(game)
    code = await recovery.issue(game, player.id)
    signed = await recovery.sign_in(game, code)
    assert signed is not None
    sync_redis.zadd(game.keys.trial, {player.id: 0}, xx=True)
    done = await trials.expire_players(game)
    assert done.expired == (player.id,)
    assert list(sync_redis.scan_iter(match=game.keys.pattern)) == []
    assert await tokens.authenticate(game, signed.token) is None
    assert await recovery.sign_in(game, code) is None

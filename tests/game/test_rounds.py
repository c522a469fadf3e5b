"""Rounds: a keyboard of distinct emoji, a secret from it, a price list, open and close on the server
clock, and the secret revealed only after the close."""

from __future__ import annotations

import pytest

from codemojex import guesses, rounds
from codemojex.errors import (
    InvalidGuess,
    InvalidId,
    InvalidKeyboard,
    InvalidOption,
    RoundClosed,
    UnknownRound,
)
from codemojex.guesses import Outcome, Refusal
from codemojex.rounds import RoundStatus
from echomq import ids
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import eventually


async def test_a_default_round_has_eight_distinct_emoji_a_secret_from_them_and_the_price_list(
    game, game_probe
):
    """Defaults: 8 keys, six of them secret (read only by the worker), 1 ticket else 5 coin, open now."""
    opened = await rounds.open_round(game)
    assert len(opened.keyboard) == 8
    assert len(set(opened.keyboard.keys)) == 8
    secret = await rounds.read_secret(game, opened.id)
    assert len(secret) == 6
    assert set(secret) <= set(opened.keyboard.keys)
    assert opened.prices == (("ticket", 1), ("coin", 5))
    assert opened.status_at(await rounds.server_ms(game)) is RoundStatus.OPEN
    assert opened.closes_ms is None
    assert await rounds.current_round(game) == opened
    assert b"secret" not in game_probe.client.hgetall(game.keys.round(opened.id))  # the row never holds it


async def test_secrets_are_drawn_fresh_for_each_round(game):
    """Twenty rounds on one keyboard do not all share a secret (a CSPRNG draws each)."""
    drawn = set()
    for _ in range(20):
        opened = await rounds.open_round(game, keyboard=list(KEYBOARD))
        drawn.add(await rounds.read_secret(game, opened.id))
    assert len(drawn) > 1


async def test_the_secret_is_revealed_only_after_the_close(game, the_round):
    """reveal_secret refuses an open round; after close_round it answers the secret; closing twice refuses."""
    with pytest.raises(RoundClosed, match="not closed"):
        await rounds.reveal_secret(game, the_round.id)
    closed_at = await rounds.close_round(game, the_round.id)
    assert closed_at >= the_round.opens_ms
    assert await rounds.reveal_secret(game, the_round.id) == SECRET
    with pytest.raises(RoundClosed, match="already closed"):
        await rounds.close_round(game, the_round.id)
    assert (await rounds.get_round(game, the_round.id)).status_at(closed_at) is RoundStatus.CLOSED
    assert await rounds.current_round(game) is None


async def test_a_closed_round_refuses_guesses_and_charges_nothing(game, the_round, player, game_probe):
    """After the close a guess is refused round_closed, and no key of the bus or the game changes."""
    await rounds.close_round(game, the_round.id)
    before = game_probe.snapshot()
    refused = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    assert (refused.outcome, refused.refusal) == (Outcome.REFUSED, Refusal.ROUND_CLOSED)
    assert game_probe.snapshot() == before


async def test_a_round_closes_by_itself_at_its_close_time(game, player):
    """A round of one second admits a guess, then refuses once its close time passed (server clock)."""
    short = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET), duration_s=1)
    assert short.closes_ms == short.opens_ms + 1000
    first = await guesses.submit(game, short.id, player.id, text(SECRET))
    assert first.outcome is Outcome.ADMITTED

    async def closed() -> bool:
        return (await guesses.submit(game, short.id, player.id, text(SECRET))).refusal is Refusal.ROUND_CLOSED

    await eventually(closed, what="the round closed at its close time")
    assert await rounds.reveal_secret(game, short.id) == SECRET


async def test_a_scheduled_round_refuses_guesses_until_it_opens(game, player):
    """A round opening in an hour is scheduled: a guess is refused round_not_open."""
    later = await rounds.open_round(game, keyboard=list(KEYBOARD), delay_s=3600)
    assert later.status_at(await rounds.server_ms(game)) is RoundStatus.SCHEDULED
    refused = await guesses.submit(game, later.id, player.id, text(SECRET))
    assert refused.refusal is Refusal.ROUND_NOT_OPEN


async def test_the_guess_limit_per_player(game, player):
    """max_guesses=2: two guesses are admitted, the third refused max_guesses with nothing charged."""
    limited = await rounds.open_round(game, keyboard=list(KEYBOARD), max_guesses=2)
    outcomes = [
        (await guesses.submit(game, limited.id, player.id, text(("🍑",) * 6))).outcome for _ in range(2)
    ]
    assert outcomes == [Outcome.ADMITTED, Outcome.ADMITTED]
    third = await guesses.submit(game, limited.id, player.id, text(("🍑",) * 6))
    assert third.refusal is Refusal.MAX_GUESSES
    assert third.charged is None


async def test_custom_prices_and_keyboard(game):
    """A price list and a keyboard of the operator's choosing are kept as given."""
    opened = await rounds.open_round(game, keyboard="🐶🐱🐭🐹🐰🦊", prices=[("coin", 2), ("gem", 1)])
    assert opened.keyboard.keys == ("🐶", "🐱", "🐭", "🐹", "🐰", "🦊")
    assert opened.prices == (("coin", 2), ("gem", 1))


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"keyboard": "🍎🍎🍌"}, InvalidKeyboard),
        ({"keyboard": "abc"}, InvalidKeyboard),
        ({"size": 1}, InvalidOption),
        ({"size": 33}, InvalidOption),
        ({"keyboard": list(KEYBOARD), "size": 8}, InvalidOption),
        ({"prices": []}, InvalidOption),
        ({"prices": [("Ticket", 1)]}, InvalidOption),
        ({"prices": [("ticket", 0)]}, InvalidOption),
        ({"prices": [("ticket", 1), ("ticket", 2)]}, InvalidOption),
        ({"prices": "ticket=1"}, InvalidOption),
        ({"duration_s": 0}, InvalidOption),
        ({"duration_s": -5}, InvalidOption),
        ({"delay_s": -1}, InvalidOption),
        ({"max_guesses": 0}, InvalidOption),
        ({"max_guesses": True}, InvalidOption),
        ({"keyboard": list(KEYBOARD), "secret": ["🍎"] * 5}, InvalidGuess),
        ({"keyboard": list(KEYBOARD), "secret": ["🐶"] * 6}, InvalidGuess),
    ],
)
async def test_open_round_refuses_bad_options_and_writes_nothing(game, game_probe, options, error):
    """Each ill-formed option is a typed error, and no key is written."""
    with pytest.raises(error):
        await rounds.open_round(game, **options)
    assert game_probe.snapshot() == {}


async def test_unknown_and_ill_formed_round_ids(game):
    """A well-formed id of no round is UnknownRound; an ill-formed one is InvalidId (an InvalidInput)."""
    with pytest.raises(UnknownRound):
        await rounds.get_round(game, ids.mint("RND"))
    with pytest.raises(UnknownRound):
        await rounds.close_round(game, ids.mint("RND"))
    for bad in ["", "RND", "rnd00T4CA4BVV00APYJQVANW0S", ids.mint("PLR"), "RND00T4CA4BVV00APYJQVANW0S}x", 42]:
        with pytest.raises(InvalidId):
            await rounds.get_round(game, bad)  # type: ignore[arg-type]

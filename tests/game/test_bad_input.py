"""Bad input at every entry of the game: a clear, typed error (or a typed refusal), and nothing changes.

Each case runs against a game that holds an open round, a player with a scored guess and a queued one,
and compares every key of the bus and of the game before and after.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from codemojex import guesses, leaderboard, locks, players, rounds, score_worker, wallet
from codemojex.errors import (
    CodemojexError,
    InvalidGuess,
    InvalidId,
    InvalidInput,
    InvalidName,
    InvalidOption,
    NameTaken,
    UnknownPlayer,
    UnknownRound,
)
from codemojex.guesses import Outcome, Refusal
from echomq import Job, ids
from tests.support.game import SECRET, text

GOOD = text(("🍎", "🍌", "🍇", "🍒", "🥝", "🍑"))
ILL_FORMED_IDS = [
    "",
    "RND",
    "PLR00T4CA4BVWHAM7E401QCBQ",  # one character short
    "PLR00T4CA4BVWHAM7E401QCBQCX",  # one too many
    "plr00t4ca4bvwham7e401qcbqc",  # lower case
    "PLR00T4CA4BVWHAM7E401QCBQ}",  # a brace would break the hash tag
    "PLR00T4CA4BVWHAM7E401QCB*C",  # a glob character
    "PLR90T4CA4BVWHAM7E401QCBQC",  # a body over 14 bytes
    None,
    7,
]


@pytest.fixture
async def world(game, the_round, player, game_probe):
    """A round, a player with one scored guess and one queued guess, and their snapshot."""
    await guesses.submit(game, the_round.id, player.id, GOOD)
    claims = await game.bus.claim(1)
    await score_worker.handle(game, Job(claims[0]))
    await guesses.submit(game, the_round.id, player.id, GOOD)
    return game, the_round, player, game_probe


async def _refused_unchanged(world, call: Callable[[], Awaitable[Any]], error: type[CodemojexError]):
    *_, game_probe = world
    before = game_probe.snapshot()
    with pytest.raises(error) as caught:
        await call()
    assert game_probe.snapshot() == before
    assert isinstance(caught.value, CodemojexError)
    assert caught.value.code  # every error carries its stable code
    return caught.value


@pytest.mark.parametrize("bad", ILL_FORMED_IDS)
async def test_ill_formed_ids_at_every_entry_are_invalid_id(world, bad):
    """Round, player and job ids are checked before any key is built from them."""
    game, the_round, player, _ = world
    calls = [
        lambda: guesses.submit(game, bad, player.id, GOOD),
        lambda: guesses.submit(game, the_round.id, bad, GOOD),
        lambda: rounds.get_round(game, bad),
        lambda: rounds.close_round(game, bad),
        lambda: rounds.reveal_secret(game, bad),
        lambda: players.get_player(game, bad),
        lambda: wallet.read_wallet(game, bad),
        lambda: wallet.credit(game, bad, "coin", 1),
        lambda: locks.lock(game, the_round.id, bad, 0),
        lambda: locks.lock(game, bad, player.id, 0),
        lambda: leaderboard.read_board(game, bad),
        lambda: guesses.player_guesses(game, the_round.id, bad),
        lambda: guesses.get_guess(game, bad),
    ]
    if bad is not None:  # job_id=None means "mint one"
        calls.append(lambda: guesses.submit(game, the_round.id, player.id, GOOD, job_id=bad))
    for call in calls:
        error = await _refused_unchanged(world, call, InvalidId)
        assert isinstance(error, InvalidInput)
        assert isinstance(error, ValueError)


async def test_a_well_formed_id_of_another_brand_is_invalid_id(world):
    """A PLR where a RND belongs (and the reverse) is refused, not looked up."""
    game, the_round, player, _ = world
    await _refused_unchanged(world, lambda: guesses.submit(game, player.id, the_round.id, GOOD), InvalidId)
    await _refused_unchanged(
        world, lambda: guesses.submit(game, the_round.id, player.id, GOOD, job_id=ids.mint("GES")), InvalidId
    )


async def test_unknown_rounds_and_players(world):
    """Well-formed ids of nothing: UnknownRound / UnknownPlayer, nothing charged or queued."""
    game, the_round, player, _ = world
    await _refused_unchanged(
        world, lambda: guesses.submit(game, ids.mint("RND"), player.id, GOOD), UnknownRound
    )
    await _refused_unchanged(
        world, lambda: guesses.submit(game, the_round.id, ids.mint("PLR"), GOOD), UnknownPlayer
    )
    await _refused_unchanged(world, lambda: players.get_player(game, ids.mint("PLR")), UnknownPlayer)
    await _refused_unchanged(world, lambda: wallet.read_wallet(game, ids.mint("PLR")), UnknownPlayer)


@pytest.mark.parametrize(
    ("guess", "problem"),
    [
        ("", "empty"),
        ([], "empty"),
        ("🍎🍌🍇🍒🥝", "wrong_length"),
        ("🍎🍌🍇🍒🥝🍑🍍", "wrong_length"),
        ("🍎🍌🍇🍒🥝🐶", "off_keyboard"),
        ("🍎🍌🍇🍒🥝a", "off_keyboard"),
        ("🍎🍌🍇 🍒🥝🍑", "whitespace"),
        ("🍎🍌🍇\n🍒🥝🍑", "control"),
        ("🍎🍌🍇\x00🍒🥝🍑", "control"),
        ("🍎🍌🍇\u202e🍒🥝🍑", "control"),
        ("🍎" * 300, "too_long"),
        ("🍎🍌🍇🍒🥝_", "blank"),
        (42, "not_text"),
        ([1, 2, 3, 4, 5, 6], "not_text"),
    ],
)
async def test_a_bad_guess_is_a_refusal_that_charges_and_enqueues_nothing(world, guess, problem):
    """Every way a guess can be wrong: REFUSED / BAD_GUESS with the problem named, and no key changes."""
    game, the_round, player, game_probe = world
    before = game_probe.snapshot()
    refused = await guesses.submit(game, the_round.id, player.id, guess)
    assert (refused.outcome, refused.refusal, refused.problem) == (
        Outcome.REFUSED,
        Refusal.BAD_GUESS,
        problem,
    )
    assert refused.detail
    assert refused.charged is None
    assert game_probe.snapshot() == before


async def test_the_same_job_id_with_another_guess_is_an_idempotency_conflict(world):
    """A retry that changed the guess is refused, not admitted twice, and charges nothing."""
    game, the_round, player, game_probe = world
    first = await guesses.submit(game, the_round.id, player.id, text(SECRET))
    before = game_probe.snapshot()
    conflict = await guesses.submit(game, the_round.id, player.id, GOOD, job_id=first.job)
    assert conflict.refusal is Refusal.IDEMPOTENCY_CONFLICT
    assert conflict.charged is None
    after = game_probe.snapshot()
    stats = game.bus.keys.stats
    assert {k: v for k, v in after.items() if k != stats} == {k: v for k, v in before.items() if k != stats}


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        "x" * 33,
        "tab\there",
        "new\nline",
        "nul\x00",
        "bidi\u202eevil",
        b"bytes",
        None,
        5,
        "\ud800",  # a lone surrogate: no UTF-8 stands for it
        "Ada\udcff",
        "\u3164",  # HANGUL FILLER
        "\u3164\u3164 ",
        "\u2800",  # BRAILLE PATTERN BLANK
        "\u115f\u1160",  # the Hangul choseong and jungseong fillers
        "\uffa0",  # HALFWIDTH HANGUL FILLER
        "Ada\u3164",  # a filler inside a name hides nothing good either
        "\u200b\u200b",  # ZERO WIDTH SPACE
        "\u200d",  # a joiner alone
        "\ufe0f\ufe0e",  # variation selectors alone
        "\u0301\u0302",  # combining marks alone
        "\u3000",  # IDEOGRAPHIC SPACE (a space after NFKC)
        "Z\u0335\u0321\u0322alg\u0337o",  # three marks stacked on one letter: zalgo
        "e\u0301\u0301\u0301",
        "\U000f0000",  # private use
        "\U000e0001",  # LANGUAGE TAG (format)
    ],
)
async def test_bad_display_names_are_refused(game, game_probe, name):
    """A name is 1-32 characters that show something after NFKC, with no control, format (ZWJ
    excepted), filler, private-use or surrogate character and at most two marks on one character:
    anything else is InvalidName and registers nobody."""
    with pytest.raises(InvalidName):
        await players.register(game, name)
    assert game_probe.snapshot() == {}


async def test_names_that_look_alike_are_one_name(game, game_probe):
    """A name whose skeleton (NFKC, case folded, look-alike letters and 0/1 mapped) another player
    holds is NameTaken, and registers nobody; a name that only shares letters is fine."""
    bob = await players.register(game, "Bob")
    before = game_probe.snapshot()
    for look_alike in [
        "Bob",
        "BOB",
        "bob",
        " Bob ",
        "B\u043eb",
        "\u0392\u039f\u0392",  # Greek capitals
        "B0b",
        "\uff22ob",
        "Bob\ufe0f",
    ]:
        with pytest.raises(NameTaken) as caught:
            await players.register(game, look_alike)
        assert caught.value.code == "name_taken"
        assert game_probe.snapshot() == before
    assert (await players.get_player(game, bob.id)).name == "Bob"
    assert (await players.register(game, "Bobby")).name == "Bobby"
    assert (await players.register(game, "Ada Lovelace")).name == "Ada Lovelace"
    with pytest.raises(NameTaken):
        await players.register(game, "ADA  L0VELACE")
    with pytest.raises(NameTaken):
        await players.register(game, "\u0391da Lovelace")  # a Greek capital alpha
    assert (await players.register(game, "Eve", token=players.new_token())).name == "Eve"
    with pytest.raises(NameTaken):  # a refused name binds no token either
        await players.register(game, "EVE", token=players.new_token())


async def test_a_lone_surrogate_in_a_guess_is_a_control_refusal(world):
    """A guess holding a lone surrogate is refused as a control character, charging nothing."""
    game, the_round, player, game_probe = world
    before = game_probe.snapshot()
    refused = await guesses.submit(game, the_round.id, player.id, "\U0001f34e\ud800\U0001f34c")
    assert (refused.refusal, refused.problem) == (Refusal.BAD_GUESS, "control")
    assert game_probe.snapshot() == before


async def test_good_display_names_are_kept_normalized(game):
    """Emoji with ZWJ and accents are fine; surrounding spaces are stripped; NFKC is applied."""
    ada = await players.register(game, "  Ada 👩‍💻 ")
    assert ada.name == "Ada 👩‍💻"
    jose = await players.register(game, "Jose\u0301")
    assert jose.name == "José"
    assert (await players.get_player(game, jose.id)).name == "José"
    assert (await players.register(game, "\uff2b\uff49\uff4d")).name == "Kim"  # full-width letters
    assert (await players.register(game, "Vi\u1ec7t")).name == "Vi\u1ec7t"  # two marks on one letter
    assert (await players.register(game, "\u2764\ufe0f")).name == "\u2764\ufe0f"  # an emoji's selector


async def test_bad_limits_are_invalid_option(world):
    """Listing calls refuse limits out of range."""
    game, the_round, *_ = world
    for call in (
        lambda: rounds.list_rounds(game, 0),
        lambda: leaderboard.read_board(game, the_round.id, 0),
        lambda: leaderboard.read_board(game, the_round.id, True),
    ):
        await _refused_unchanged(world, call, InvalidOption)


def test_invalid_guess_names_its_problem():
    """InvalidGuess is an InvalidInput carrying a machine-readable problem."""
    error = InvalidGuess("six keys, got five", "wrong_length")
    assert isinstance(error, InvalidInput)
    assert (error.problem, error.code) == ("wrong_length", "invalid_guess")


async def test_an_unknown_player_is_unknown_whatever_else_is_wrong(world):
    """An unknown player with a bad guess, a lock or an unlock: UnknownPlayer, not a refusal or NotProven."""
    game, the_round, _, _ = world
    stranger = ids.mint("PLR")
    await _refused_unchanged(
        world, lambda: guesses.submit(game, the_round.id, stranger, "nope"), UnknownPlayer
    )
    await _refused_unchanged(world, lambda: locks.lock(game, the_round.id, stranger, 0), UnknownPlayer)
    await _refused_unchanged(world, lambda: locks.unlock(game, the_round.id, stranger, 0), UnknownPlayer)


@pytest.mark.parametrize("limit", [0, -1, 10_001, True, "5"])
async def test_listing_a_players_guesses_refuses_a_bad_limit(world, limit):
    """player_guesses takes 1-10,000."""
    game, the_round, player, _ = world
    await _refused_unchanged(
        world, lambda: guesses.player_guesses(game, the_round.id, player.id, limit), InvalidOption
    )

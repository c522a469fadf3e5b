"""codemojex.ranking: the leaderboard order, its byte-ordered members, and folding guesses in."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.errors import InvalidInput
from codemojex.ranking import (
    ATTEMPTS_CAP,
    MAX_AT_MS,
    Standing,
    board_member,
    fold,
    is_legacy_member,
    parse_board_member,
    rank,
    sort_key,
)
from tests.support.game import legacy_member

PLAYER = "PLR" + "0" * 23
OTHER = "PLR" + "1" * 23
T0 = 1_700_000_000_000

PLAYERS = st.text(alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=23, max_size=23).map(
    lambda body: "PLR" + body
)


@st.composite
def standings(draw, max_attempts=ATTEMPTS_CAP):
    """Consistent standings of a six-key round: solved exactly when the best has six hits."""
    solved = draw(st.booleans())
    if solved:
        hits, nears = 6, 0
    else:
        hits = draw(st.integers(0, 5))
        nears = draw(st.integers(0, 6 - hits))
    return Standing(
        player=draw(PLAYERS),
        attempts=draw(st.integers(1, max_attempts)),
        best_hits=hits,
        best_nears=nears,
        solved=solved,
        best_at_ms=draw(st.integers(0, MAX_AT_MS)),
    )


def standing(
    *, player=PLAYER, attempts=3, best_hits=2, best_nears=1, solved=False, best_at_ms=T0
) -> Standing:
    return Standing(player, attempts, best_hits, best_nears, solved, best_at_ms)


def solved(**fields) -> Standing:
    return standing(best_hits=6, best_nears=0, solved=True, **fields)


def assert_order(better: Standing, worse: Standing) -> None:
    assert sort_key(better) < sort_key(worse)
    assert rank([worse, better]) == [better, worse]
    assert board_member(better) < board_member(worse)
    assert board_member(better).encode() < board_member(worse).encode()


# -- the order, rule by rule ----------------------------------------------------------------------------


def test_solved_first_even_with_many_more_attempts_and_later():
    assert_order(solved(attempts=90, best_at_ms=T0 + 10**9), standing(best_hits=5, best_nears=1, attempts=1))


def test_then_more_hits():
    assert_order(standing(best_hits=3, best_nears=0, attempts=9), standing(best_hits=2, best_nears=4))


def test_then_more_nears():
    assert_order(standing(best_hits=2, best_nears=3, attempts=9), standing(best_hits=2, best_nears=2))


def test_then_earlier_best_whatever_the_attempts():
    """The solve time ranks solved players; attempts (which another account can buy) do not come first."""
    assert_order(standing(best_at_ms=T0, player=OTHER), standing(best_at_ms=T0 + 1, player=PLAYER))
    assert_order(solved(best_at_ms=T0, player=OTHER), solved(best_at_ms=T0 + 1, player=PLAYER))
    assert_order(solved(attempts=13, best_at_ms=T0), solved(attempts=1, best_at_ms=T0 + 1))
    assert_order(standing(attempts=9, best_at_ms=T0), standing(attempts=1, best_at_ms=T0 + 1))


def test_then_fewer_attempts_in_the_same_millisecond():
    assert_order(standing(attempts=4, player=OTHER), standing(attempts=5, player=PLAYER))
    assert_order(solved(attempts=4, player=OTHER), solved(attempts=5, player=PLAYER))


def test_then_the_player_id():
    assert_order(standing(player=PLAYER), standing(player=OTHER))


def test_attempts_beyond_the_cap_tie():
    assert sort_key(standing(attempts=ATTEMPTS_CAP)) == sort_key(standing(attempts=ATTEMPTS_CAP + 7))
    assert board_member(standing(attempts=ATTEMPTS_CAP + 7)) == board_member(standing(attempts=ATTEMPTS_CAP))


def test_rank_is_a_total_order_independent_of_input_order():
    everyone = [
        solved(attempts=3, player=OTHER),
        solved(attempts=3),
        solved(attempts=2, best_at_ms=T0 + 99),
        standing(best_hits=5, best_nears=0),
        standing(best_hits=4, best_nears=2),
        standing(best_hits=4, best_nears=2, attempts=2),
        standing(best_hits=0, best_nears=0, attempts=1),
        standing(best_hits=4, best_nears=2, attempts=1, best_at_ms=T0 + 1),
    ]
    expected = [everyone[i] for i in (1, 0, 2, 3, 5, 4, 7, 6)]
    for seed in range(20):
        shuffled = everyone[:]
        random.Random(seed).shuffle(shuffled)
        assert rank(shuffled) == expected
    assert rank(iter(everyone)) == expected
    assert rank([]) == []


# -- board members ---------------------------------------------------------------------------------------


def test_board_member_format_is_exact():
    assert board_member(standing(attempts=3, best_hits=4, best_nears=1, best_at_ms=T0 + 123)) == (
        "125@" + "1700000000123" + "000003" + ":" + PLAYER
    )
    assert board_member(solved(attempts=12, best_at_ms=7)) == "006@" + "0000000000007" + "000012:" + PLAYER
    assert board_member(standing(attempts=0, best_hits=0, best_nears=0, best_at_ms=0)) == (
        "166@" + "0" * 13 + "000000:" + PLAYER
    )
    assert board_member(standing(attempts=10**7)) == "145@" + "1700000000000" + "999999:" + PLAYER


@given(st.lists(standings(), max_size=30))
def test_byte_order_of_members_is_rank_order(board):
    by_member = sorted(board, key=board_member)
    by_bytes = sorted(board, key=lambda s: board_member(s).encode("utf-8"))
    assert by_member == by_bytes == rank(board)


@given(standings(), standings())
def test_member_order_agrees_with_sort_key_pairwise(one, two):
    assert (board_member(one) < board_member(two)) == (sort_key(one) < sort_key(two))
    assert (board_member(one) == board_member(two)) == (one == two)


@given(standings())
def test_parse_board_member_inverts_board_member(s):
    member = board_member(s)
    assert member.isascii()
    assert len(member) == 23 + 1 + len(s.player)
    assert not is_legacy_member(member)
    assert parse_board_member(member) == s


def test_parse_board_member_keeps_a_colon_in_the_player():
    s = standing(player="odd:player")
    assert parse_board_member(board_member(s)) == s


@pytest.mark.parametrize(
    "member",
    [
        "",
        "garbage",
        "125@1700000000123000003" + PLAYER,  # no colon
        "125@1700000000123000003:",  # no player
        "125@170000000012000003:" + PLAYER,  # 12-digit time
        "125@17000000001234000003:" + PLAYER,  # 14-digit time
        "125@170000000012300003:" + PLAYER,  # 5-digit attempts
        "225@1700000000123000003:" + PLAYER,  # solved flag 2
        "175@1700000000123000003:" + PLAYER,  # hits digit 7
        "015@1700000000123000003:" + PLAYER,  # solved with 5 hits
        "106@1700000000123000003:" + PLAYER,  # six hits, not solved
        "111@1700000000123000003:" + PLAYER,  # 5 hits and 5 nears
        "125@\uff11700000000123000003:" + PLAYER,  # a full-width digit
        "125#1700000000123000003:" + PLAYER,  # another mark
        " 125@170000000123000003:" + PLAYER,
        "1250000031700000000123:" + PLAYER,  # the earlier rule's member (attempts, then time)
        b"125@1700000000123000003:PLR",
        None,
    ],
)
def test_parse_board_member_refuses_malformed_members(member):
    with pytest.raises(InvalidInput):
        parse_board_member(member)


@pytest.mark.parametrize(
    "s",
    [
        standing(best_hits=6, best_nears=0, solved=False),
        standing(best_hits=5, best_nears=0, solved=True),
        standing(best_hits=7, best_nears=0),
        standing(best_hits=4, best_nears=3),
        standing(best_at_ms=MAX_AT_MS + 1),
    ],
)
def test_board_member_refuses_what_it_cannot_order(s):
    with pytest.raises(InvalidInput):
        board_member(s)


@pytest.mark.parametrize(
    "fields",
    [
        {"player": ""},
        {"player": None},
        {"attempts": -1},
        {"attempts": True},
        {"attempts": 1.0},
        {"best_hits": -1},
        {"best_nears": "1"},
        {"best_at_ms": -5},
        {"solved": 1},
    ],
)
def test_standing_refuses_ill_typed_fields(fields):
    with pytest.raises(InvalidInput):
        standing(**fields)


# -- fold ------------------------------------------------------------------------------------------------


def test_the_first_guess_starts_a_standing():
    assert fold(None, PLAYER, 2, 1, T0) == Standing(PLAYER, 1, 2, 1, False, T0)
    assert fold(None, PLAYER, 6, 0, T0) == Standing(PLAYER, 1, 6, 0, True, T0)
    assert fold(None, PLAYER, 0, 0, T0) == Standing(PLAYER, 1, 0, 0, False, T0)


def test_a_strictly_better_guess_becomes_the_best():
    first = fold(None, PLAYER, 2, 3, T0)
    assert fold(first, PLAYER, 3, 0, T0 + 10) == Standing(PLAYER, 2, 3, 0, False, T0 + 10)
    assert fold(first, PLAYER, 2, 4, T0 + 10) == Standing(PLAYER, 2, 2, 4, False, T0 + 10)


def test_an_equal_or_worse_guess_counts_but_keeps_the_best_and_its_time():
    first = fold(None, PLAYER, 2, 3, T0)
    assert fold(first, PLAYER, 2, 3, T0 + 10) == Standing(PLAYER, 2, 2, 3, False, T0)
    assert fold(first, PLAYER, 1, 5, T0 + 10) == Standing(PLAYER, 2, 2, 3, False, T0)
    assert fold(first, PLAYER, 2, 0, T0 + 10) == Standing(PLAYER, 2, 2, 3, False, T0)


def test_the_solve_sets_solved_and_the_solve_time():
    after = fold(fold(None, PLAYER, 5, 0, T0), PLAYER, 6, 0, T0 + 7)
    assert after == Standing(PLAYER, 2, 6, 0, True, T0 + 7)


def test_nothing_changes_after_the_solve():
    done = fold(fold(None, PLAYER, 1, 1, T0), PLAYER, 6, 0, T0 + 7)
    assert fold(done, PLAYER, 0, 0, T0 + 8) is done
    assert fold(done, PLAYER, 6, 0, T0 + 9) is done


def test_fold_with_another_length():
    assert fold(None, PLAYER, 4, 0, T0, length=4).solved
    assert not fold(None, PLAYER, 4, 0, T0).solved
    with pytest.raises(InvalidInput):
        fold(None, PLAYER, 3, 2, T0, length=4)


@pytest.mark.parametrize(
    ("hits", "nears", "at_ms"), [(-1, 0, T0), (0, -1, T0), (4, 3, T0), (7, 0, T0), (2, 1, -1), (True, 0, T0)]
)
def test_fold_refuses_impossible_guesses(hits, nears, at_ms):
    with pytest.raises(InvalidInput):
        fold(None, PLAYER, hits, nears, at_ms)
    with pytest.raises(InvalidInput):
        fold(standing(), PLAYER, hits, nears, at_ms)


def test_fold_refuses_another_players_or_an_inconsistent_standing():
    with pytest.raises(InvalidInput):
        fold(standing(player=OTHER), PLAYER, 1, 1, T0)
    with pytest.raises(InvalidInput):
        fold(standing(best_hits=6, best_nears=0, solved=False), PLAYER, 1, 1, T0)
    with pytest.raises(InvalidInput):
        fold(standing(solved=True), PLAYER, 1, 1, T0)
    with pytest.raises(InvalidInput):
        fold(None, PLAYER, 1, 1, T0, length=0)


FEEDBACK = st.integers(0, 6).flatmap(lambda hits: st.tuples(st.just(hits), st.integers(0, 6 - hits)))
GUESSES = st.lists(
    st.tuples(FEEDBACK, st.integers(0, 10**6)).map(lambda pair: (*pair[0], pair[1])), min_size=1, max_size=40
)


def reference(guesses, player=PLAYER, length=6):
    """Fold by hand: count up to the first solve; the best is the first occurrence of the maximum."""
    counted = []
    for guess in guesses:
        counted.append(guess)
        if guess[0] == length:
            break
    best = max((hits, nears) for hits, nears, _ in counted)
    best_at = next(at for hits, nears, at in counted if (hits, nears) == best)
    return Standing(player, len(counted), best[0], best[1], best[0] == length, best_at)


def fold_all(guesses, player=PLAYER):
    s = None
    history = []
    for hits, nears, at_ms in guesses:
        s = fold(s, player, hits, nears, at_ms)
        history.append(s)
    return s, history


@given(GUESSES)
def test_folding_a_sequence_equals_the_reference(guesses):
    final, _ = fold_all(guesses)
    assert final == reference(guesses)


@given(GUESSES)
def test_fold_laws_along_the_way(guesses):
    _, history = fold_all(guesses)
    first_solve = next((i for i, (hits, _, _) in enumerate(guesses) if hits == 6), None)
    for i, s in enumerate(history):
        # attempts count scored guesses until the solve
        assert s.attempts == (i + 1 if first_solve is None or i <= first_solve else first_solve + 1)
        assert s.solved == (first_solve is not None and i >= first_solve)
    for before, after in pairwise(history):
        assert (after.best_hits, after.best_nears) >= (before.best_hits, before.best_nears)  # never worse
        if before.solved:
            assert after == before  # nothing changes after a solve
        else:
            assert after.attempts == before.attempts + 1


@given(GUESSES)
def test_a_folded_standing_is_always_a_valid_board_member(guesses):
    _, history = fold_all(guesses)
    for s in history:
        assert parse_board_member(board_member(s)) == s


# -- members of the earlier rule -------------------------------------------------------------------------


@given(standings())
def test_a_member_of_the_earlier_rule_is_told_apart_and_never_parsed(s):
    old = legacy_member(s)
    assert is_legacy_member(old)
    assert not is_legacy_member(board_member(s))
    with pytest.raises(InvalidInput):
        parse_board_member(old)


@pytest.mark.parametrize("member", ["", "garbage", "125@1700000000123000003:" + PLAYER, None, b"125"])
def test_is_legacy_member_is_false_for_anything_else(member):
    assert not is_legacy_member(member)


@given(standings(), standings())
def test_an_earlier_rules_member_sorts_before_every_current_member_of_its_feedback(old, new):
    """So a page of the board without one is exact (codemojex.leaderboard.read_board)."""
    if (old.solved, old.best_hits, old.best_nears) == (new.solved, new.best_hits, new.best_nears):
        assert legacy_member(old).encode() < board_member(new).encode()
    else:
        assert (legacy_member(old) < board_member(new)) == (sort_key(old) < sort_key(new))

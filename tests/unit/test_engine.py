"""codemojex.engine: hit / near / miss feedback in linear time, repeats handled leftmost-first."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex.engine import LENGTH, Feedback, Mark, score
from codemojex.errors import InvalidInput

THUMBS = "\U0001f44d"  # 👍
THUMBS_MEDIUM = "\U0001f44d\U0001f3fd"  # 👍🏽 with a skin-tone modifier
THUMBS_DARK = "\U0001f44d\U0001f3ff"  # 👍🏿
MAN = "\U0001f468"  # 👨
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # 👨‍👩‍👧 a ZWJ sequence that starts with MAN
FRANCE = "\U0001f1eb\U0001f1f7"  # 🇫🇷
APPLE, PEAR, LEMON = "🍎", "🍐", "🍋"


def reference(secret, guess) -> str:
    """A quadratic model of the rule: for each non-hit guess position, left to right, use up the first
    unused non-hit secret position with the same key."""
    hit = [s == g for s, g in zip(secret, guess, strict=True)]
    used = [False] * len(secret)
    letters = []
    for i, key in enumerate(guess):
        if hit[i]:
            letters.append("H")
            continue
        for j, want in enumerate(secret):
            if not hit[j] and not used[j] and want == key:
                used[j] = True
                letters.append("N")
                break
        else:
            letters.append("-")
    return "".join(letters)


# A small alphabet forces many repeats; a few emoji strings show keys are compared whole.
KEYS = st.sampled_from(["A", "B", "C", "D", THUMBS, THUMBS_MEDIUM, FAMILY, MAN])


@st.composite
def pairs(draw, min_size=1, max_size=10):
    n = draw(st.integers(min_size, max_size))
    secret = draw(st.lists(KEYS, min_size=n, max_size=n))
    guess = draw(st.lists(KEYS, min_size=n, max_size=n))
    return secret, guess


# -- Mark and Feedback -----------------------------------------------------------------------------


def test_marks_are_string_values():
    assert [Mark.HIT, Mark.NEAR, Mark.MISS] == ["hit", "near", "miss"]
    assert Mark("near") is Mark.NEAR


def test_feedback_counts_code_and_solved():
    feedback = Feedback((Mark.HIT, Mark.NEAR, Mark.MISS, Mark.MISS, Mark.HIT, Mark.MISS))
    assert (feedback.hits, feedback.nears, feedback.misses) == (2, 1, 3)
    assert feedback.code() == "HN--H-"
    assert not feedback.solved
    assert Feedback((Mark.HIT,) * LENGTH).solved


@pytest.mark.parametrize("code", ["H", "-", "HN--H-", "HHHHHH", "NNNNNN", "------", "NH-NH-NH-"])
def test_from_code_inverts_code(code):
    feedback = Feedback.from_code(code)
    assert feedback.code() == code
    assert len(feedback.marks) == len(code)
    assert feedback.hits + feedback.nears + feedback.misses == len(code)


@pytest.mark.parametrize("code", ["", "h", "HX", "HN--H- ", "HN_-", "\u0048\u0301", None, 7, ["H"]])
def test_from_code_refuses_anything_else(code):
    with pytest.raises(InvalidInput):
        Feedback.from_code(code)


@pytest.mark.parametrize("marks", [(), [Mark.HIT], ("hit",), (Mark.HIT, "H")])
def test_feedback_refuses_empty_or_foreign_marks(marks):
    with pytest.raises(InvalidInput):
        Feedback(marks)


def test_feedback_is_a_frozen_value():
    one, two = Feedback.from_code("HN-"), Feedback.from_code("HN-")
    assert one == two
    assert hash(one) == hash(two)
    with pytest.raises(AttributeError):
        one.marks = ()


# -- hand-written examples ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secret", "guess", "code"),
    [
        ("AABBCC", "AAAAAA", "HH----"),  # the secret's As are both hits: no A is left for a near
        ("ABCDEF", "FEDCBA", "NNNNNN"),
        ("ABCDEF", "ABCDEF", "HHHHHH"),
        ("AAAAAA", "BBBBBB", "------"),
        ("AABCDE", "BAAAAA", "NHN---"),  # one unmatched A: the leftmost non-hit A of the guess is near
        ("ABCABC", "CCCAAA", "N-HHN-"),
        ("ABBBBB", "AABBBB", "H-HHHH"),  # the only A is a hit, so the second A is a miss
        ("AABBCC", "BBCCAA", "NNNNNN"),
        ("AB", "BB", "-H"),
        ("A", "A", "H"),
        ("A", "B", "-"),
    ],
)
def test_examples(secret, guess, code):
    assert score(secret, guess).code() == code
    assert reference(secret, guess) == code


def test_emoji_keys_are_compared_whole():
    """A skin tone, a ZWJ sequence and a flag are keys of their own, distinct from their parts."""
    secret = (THUMBS_MEDIUM, FAMILY, FRANCE, APPLE, PEAR, LEMON)
    assert score(secret, secret).solved
    assert score(secret, (THUMBS, MAN, FRANCE, APPLE, PEAR, LEMON)).code() == "--HHHH"
    assert score(secret, (THUMBS_DARK, LEMON, FAMILY, APPLE, PEAR, THUMBS_MEDIUM)).code() == "-NNHHN"
    assert score(secret, (FAMILY,) * 6).code() == "-H----"


def test_emoji_repeats_near_leftmost():
    secret = (APPLE, APPLE, PEAR, PEAR, FAMILY, LEMON)
    guess = (PEAR, FAMILY, FAMILY, APPLE, APPLE, APPLE)
    # hits: none. unmatched: 2 apples, 2 pears, 1 family, 1 lemon.
    assert score(secret, guess).code() == "NN-NN-"


def test_score_returns_feedback_of_marks():
    feedback = score("AB", "BA")
    assert isinstance(feedback, Feedback)
    assert feedback.marks == (Mark.NEAR, Mark.NEAR)


@pytest.mark.parametrize(("secret", "guess"), [("", ""), ((), ()), ("ABC", "AB"), ("A", "")])
def test_score_refuses_empty_or_unequal_lengths(secret, guess):
    with pytest.raises(InvalidInput) as raised:
        score(secret, guess)
    assert isinstance(raised.value, ValueError)


# -- properties --------------------------------------------------------------------------------------


@given(pairs())
def test_score_matches_the_quadratic_reference(pair):
    secret, guess = pair
    assert score(secret, guess).code() == reference(secret, guess)


@given(pairs())
def test_counts_are_bounded_and_consistent(pair):
    secret, guess = pair
    feedback = score(secret, guess)
    assert len(feedback.marks) == len(secret)
    assert feedback.hits + feedback.nears <= len(secret)
    assert feedback.hits + feedback.nears + feedback.misses == len(secret)
    assert feedback.solved == (list(secret) == list(guess))


@given(st.lists(KEYS, min_size=1, max_size=10))
def test_a_code_scored_against_itself_is_solved(secret):
    feedback = score(secret, secret)
    assert feedback.solved
    assert feedback.hits == len(secret)
    assert feedback.code() == "H" * len(secret)


@given(pairs())
def test_hits_and_hits_plus_nears_are_symmetric(pair):
    secret, guess = pair
    forward, backward = score(secret, guess), score(guess, secret)
    assert forward.hits == backward.hits
    assert forward.hits + forward.nears == backward.hits + backward.nears


@given(pairs())
def test_hits_plus_nears_is_the_multiset_intersection(pair):
    secret, guess = pair
    feedback = score(secret, guess)
    assert feedback.hits + feedback.nears == sum((Counter(secret) & Counter(guess)).values())


@given(pairs(), st.data())
def test_totals_are_invariant_under_one_permutation_of_both(pair, data):
    secret, guess = pair
    order = data.draw(st.permutations(range(len(secret))))
    before = score(secret, guess)
    after = score([secret[i] for i in order], [guess[i] for i in order])
    assert after.hits == before.hits
    assert after.hits + after.nears == before.hits + before.nears
    # and the hits move with their positions
    assert [after.marks[k] is Mark.HIT for k in range(len(order))] == [
        before.marks[i] is Mark.HIT for i in order
    ]


@given(pairs())
def test_a_key_is_near_at_most_as_often_as_it_is_unmatched_in_the_secret(pair):
    secret, guess = pair
    marks = score(secret, guess).marks
    unmatched = Counter(s for s, g in zip(secret, guess, strict=True) if s != g)
    nears = Counter(g for g, mark in zip(guess, marks, strict=True) if mark is Mark.NEAR)
    for key, count in nears.items():
        assert count <= unmatched[key]
    # a miss on a key means every unmatched occurrence of it was used by a near to its left
    for i, (key, mark) in enumerate(zip(guess, marks, strict=True)):
        if mark is Mark.MISS:
            left = sum(1 for g, m in zip(guess[:i], marks[:i], strict=True) if g == key and m is Mark.NEAR)
            assert left == unmatched[key]

"""codemojex.emoji, codemojex.keyboard and codemojex.codes: emoji graphemes, keyboards of distinct ones, and
guesses parsed strictly onto them."""

from __future__ import annotations

import ast
import pathlib
import random
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemojex import keyboard as kb
from codemojex.codes import BLANK, MAX_GUESS_CHARS, draw_secret, parse_guess
from codemojex.emoji import graphemes, is_emoji
from codemojex.errors import InvalidGuess, InvalidInput, InvalidKeyboard, InvalidOption
from codemojex.keyboard import DEFAULT_SIZE, EMOJI_POOL, MAX_SIZE, MIN_SIZE, Keyboard, random_keyboard

ZWJ, VS16 = "\u200d", "\ufe0f"
THUMBS_MEDIUM = "\U0001f44d\U0001f3fd"  # 👍🏽
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # 👨‍👩‍👧
FRANCE = "\U0001f1eb\U0001f1f7"  # 🇫🇷
GERMANY = "\U0001f1e9\U0001f1ea"  # 🇩🇪
HEART = "\u2764\ufe0f"  # ❤️ (text-default U+2764 made emoji by VS16)
KEYCAP_ONE = "1\ufe0f\u20e3"  # 1️⃣
KEYCAP_HASH = "#\ufe0f\u20e3"  # #️⃣
ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"  # a tag sequence
HEART_ON_FIRE = "\u2764\ufe0f\u200d\U0001f525"  # ❤️‍🔥
ASTRONAUT = "\U0001f9d1\U0001f3fd\u200d\U0001f680"  # 🧑🏽‍🚀 skin tone inside a ZWJ sequence
TRICKY = (THUMBS_MEDIUM, FAMILY, FRANCE, GERMANY, HEART, KEYCAP_ONE, KEYCAP_HASH, ENGLAND)

APPLE, PEAR, ORANGE, LEMON, BANANA, MELON, GRAPES, CHERRY = "🍎", "🍐", "🍊", "🍋", "🍌", "🍉", "🍇", "🍒"
FRUIT = Keyboard.of((APPLE, PEAR, ORANGE, LEMON, BANANA, MELON, GRAPES, CHERRY))
MIXED = Keyboard.of((APPLE, PEAR, *TRICKY))
SIX = (APPLE, PEAR, ORANGE, LEMON, BANANA, MELON)


def problem_of(guess, keyboard=FRUIT, locks=None, **options):
    with pytest.raises(InvalidGuess) as raised:
        parse_guess(guess, keyboard, locks, **options)
    assert raised.value.code == "invalid_guess"
    return raised.value.problem, str(raised.value)


# -- segmentation ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cluster", [*TRICKY, HEART_ON_FIRE, ASTRONAUT, APPLE])
def test_each_emoji_is_one_grapheme(cluster):
    assert graphemes(cluster) == [cluster]
    assert graphemes(cluster * 3) == [cluster] * 3


def test_graphemes_split_a_mixed_string_in_order():
    text = "".join(TRICKY) + BLANK + APPLE
    assert graphemes(text) == [*TRICKY, BLANK, APPLE]
    assert graphemes(FRANCE + GERMANY + FRANCE) == [FRANCE, GERMANY, FRANCE]  # flags pair from the start
    assert graphemes("") == []
    assert graphemes("ab") == ["a", "b"]


@pytest.mark.parametrize("cluster", [*TRICKY, HEART_ON_FIRE, ASTRONAUT, *EMOJI_POOL, "\u261d\U0001f3fd"])
def test_is_emoji_accepts_emoji(cluster):
    assert is_emoji(cluster)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "1",
        "#",
        "*",
        "_",
        " ",
        "\u2764",  # a text-default pictograph without VS16
        "\u00a9",  # © likewise
        "\U0001f3fd",  # a lone skin-tone swatch
        "\U0001f1eb",  # half a flag
        "1\u20e3",  # a keycap without VS16
        "a\ufe0f",
        "\U0001f34e\U0001f3fd",  # a skin tone on an apple
        "\U0001f34e\u0301",  # an apple with a combining accent
        "\U0001fc00\ufe0f",  # an unassigned Extended_Pictographic code point
        APPLE + PEAR,  # two emoji
        FRANCE + GERMANY,
        APPLE + ZWJ,
        None,
        7,
    ],
)
def test_is_emoji_refuses_the_rest(text):
    assert not is_emoji(text)


# -- the pool ----------------------------------------------------------------------------------------


def test_the_pool_is_large_distinct_and_all_emoji():
    assert len(EMOJI_POOL) >= 48
    assert len(set(EMOJI_POOL)) == len(EMOJI_POOL)
    assert all(is_emoji(key) for key in EMOJI_POOL)
    assert len(EMOJI_POOL) >= MAX_SIZE
    Keyboard.of(EMOJI_POOL[:MAX_SIZE])  # any slice of the pool is a valid keyboard
    Keyboard.of(EMOJI_POOL[-MAX_SIZE:])


def test_the_pool_has_multi_code_point_emoji():
    assert any(all(0x1F1E6 <= ord(c) <= 0x1F1FF for c in key) for key in EMOJI_POOL)  # a flag
    assert any(ZWJ in key for key in EMOJI_POOL)
    assert any(any(0x1F3FB <= ord(c) <= 0x1F3FF for c in key) for key in EMOJI_POOL)  # a skin tone
    assert any(VS16 in key for key in EMOJI_POOL)


# -- Keyboard ------------------------------------------------------------------------------------------


def test_keyboard_of_a_string_or_a_sequence():
    text = APPLE + PEAR + "".join(TRICKY)
    from_text = Keyboard.of(text)
    assert from_text == MIXED
    assert from_text.keys == (APPLE, PEAR, *TRICKY)
    assert from_text.text() == text
    assert Keyboard.of(list(MIXED.keys)) == MIXED
    assert Keyboard.of(MIXED.text()) == MIXED


def test_keyboard_container_protocol():
    assert len(MIXED) == 10
    assert list(MIXED) == [APPLE, PEAR, *TRICKY]
    assert FAMILY in MIXED
    assert "\U0001f468" not in MIXED  # the man alone is not the family key
    assert ORANGE not in MIXED
    assert 7 not in MIXED


def test_keyboard_find_ignores_variation_selectors():
    keyboard = Keyboard.of((APPLE, HEART, HEART_ON_FIRE))
    assert keyboard.find(HEART) == HEART
    assert keyboard.find("\u2764") == HEART
    assert keyboard.find("\u2764\u200d\U0001f525") == HEART_ON_FIRE
    assert keyboard.find(APPLE + VS16) == APPLE
    assert keyboard.find(PEAR) is None


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ((APPLE, PEAR, APPLE), "more than once"),
        (APPLE + PEAR + APPLE, "more than once"),
        ((APPLE, "\U0001f600", "\U0001f600" + VS16), "more than once"),  # the same emoji, with VS16
        ((APPLE, PEAR, "a"), "key 3 .* not an emoji"),
        ((APPLE, PEAR + LEMON), "key 2 .* 2 characters, not one emoji"),
        ((APPLE, "\u2764"), "not an emoji"),
        ((APPLE, ""), "not an emoji"),
        ((APPLE,), "2 to 32 keys, got 1"),
        (APPLE, "2 to 32 keys, got 1"),
        ((), "2 to 32 keys, got 0"),
        ("", "2 to 32 keys, got 0"),
        (EMOJI_POOL[: MAX_SIZE + 1], "2 to 32 keys, got 33"),
        ((APPLE, 7), "not a string"),
        (7, "a string or a sequence"),
        (b"ab", "a string or a sequence"),
        ({APPLE, PEAR}, "a string or a sequence"),
    ],
)
def test_keyboard_refusals(keys, message):
    with pytest.raises(InvalidKeyboard, match=message):
        Keyboard.of(keys)


def test_keyboard_construction_validates_too():
    with pytest.raises(InvalidKeyboard):
        Keyboard(("a", "b"))
    with pytest.raises(InvalidKeyboard):
        Keyboard([APPLE, PEAR])
    assert Keyboard((APPLE, PEAR)).keys == (APPLE, PEAR)


# -- random_keyboard and draw_secret ---------------------------------------------------------------------


@pytest.mark.parametrize("size", [MIN_SIZE, 3, DEFAULT_SIZE, MAX_SIZE])
def test_random_keyboard_draws_distinct_pool_keys(size):
    keyboard = random_keyboard(size)
    assert len(keyboard) == size
    assert len(set(keyboard.keys)) == size
    assert all(key in EMOJI_POOL and key in keyboard for key in keyboard.keys)


def test_random_keyboard_defaults_to_eight_keys_and_varies():
    keyboards = [random_keyboard() for _ in range(40)]
    assert all(len(keyboard) == DEFAULT_SIZE for keyboard in keyboards)
    used = {key for keyboard in keyboards for key in keyboard}
    assert len(used) > 2 * DEFAULT_SIZE  # draws reach well beyond one fixed set of keys


@pytest.mark.parametrize("size", [0, 1, MAX_SIZE + 1, -8, True, 8.0, "8", None])
def test_random_keyboard_refuses_sizes_out_of_range(size):
    with pytest.raises(InvalidOption):
        random_keyboard(size)


def test_random_keyboard_with_an_injected_choice():
    assert random_keyboard(4, choice=lambda keys: keys[0]).keys == EMOJI_POOL[:4]
    assert random_keyboard(3, choice=lambda keys: keys[-1]).keys == EMOJI_POOL[-1:-4:-1]
    with pytest.raises(InvalidInput):
        random_keyboard(4, choice=lambda keys: "a")


@given(st.integers(MIN_SIZE, MAX_SIZE), st.integers(0, 2**32))
def test_random_keyboard_with_any_rng_is_a_valid_keyboard(size, seed):
    keyboard = random_keyboard(size, choice=random.Random(seed).choice)
    assert len(keyboard) == size
    assert set(keyboard.keys) <= set(EMOJI_POOL)


def test_draw_secret_takes_six_keys_of_the_keyboard():
    for _ in range(50):
        secret = draw_secret(MIXED)
        assert isinstance(secret, tuple)
        assert len(secret) == 6
        assert all(key in MIXED for key in secret)
    assert len(draw_secret(FRUIT, 4)) == 4


def test_draw_secret_uses_the_whole_keyboard_and_repeats():
    secrets = [draw_secret(FRUIT) for _ in range(300)]
    assert Counter(key for secret in secrets for key in secret).keys() == set(FRUIT.keys)
    assert any(len(set(secret)) < 6 for secret in secrets)  # repeats are allowed (and common)


@pytest.mark.parametrize("length", [0, -1, True, 6.0, MAX_GUESS_CHARS + 1])
def test_draw_secret_refuses_bad_lengths(length):
    with pytest.raises(InvalidOption):
        draw_secret(FRUIT, length)


# -- parse_guess: the happy paths ----------------------------------------------------------------------


def test_parse_a_typed_guess():
    assert parse_guess("".join(SIX), FRUIT) == SIX
    assert parse_guess(APPLE * 6, FRUIT) == (APPLE,) * 6


def test_parse_a_sequence_guess():
    assert parse_guess(list(SIX), FRUIT) == SIX
    assert parse_guess(SIX, FRUIT) == SIX


def test_parse_multi_code_point_keys():
    guess = (FAMILY, FRANCE, GERMANY, KEYCAP_ONE, THUMBS_MEDIUM, ENGLAND)
    assert parse_guess("".join(guess), MIXED) == guess
    assert parse_guess(FRANCE * 3 + GERMANY * 3, MIXED) == (FRANCE,) * 3 + (GERMANY,) * 3


def test_parse_a_heart_typed_without_vs16_as_the_keyboard_spells_it():
    keyboard = Keyboard.of((APPLE, HEART))
    assert parse_guess("\u2764" * 3 + APPLE * 3, keyboard) == (HEART,) * 3 + (APPLE,) * 3


def test_parse_other_lengths():
    assert parse_guess(APPLE + PEAR + LEMON, FRUIT, length=3) == (APPLE, PEAR, LEMON)
    problem, _ = problem_of(APPLE * 6, length=3)
    assert problem == "wrong_length"
    with pytest.raises(InvalidInput):
        parse_guess(APPLE, FRUIT, length=0)


# -- parse_guess: locks ----------------------------------------------------------------------------------


def test_a_lock_overlays_a_typed_key():
    assert parse_guess("".join(SIX), FRUIT, {0: GRAPES, 5: CHERRY}) == (GRAPES, *SIX[1:5], CHERRY)


def test_a_lock_fills_a_blank():
    typed = BLANK + "".join(SIX[1:5]) + BLANK
    assert parse_guess(typed, FRUIT, {0: GRAPES, 5: CHERRY}) == (GRAPES, *SIX[1:5], CHERRY)
    assert parse_guess([None, *SIX[1:]], FRUIT, {0: APPLE}) == SIX
    assert parse_guess(["_", *SIX[1:]], FRUIT, {0: APPLE}) == SIX
    assert parse_guess(BLANK * 6, FRUIT, dict(enumerate(SIX))) == SIX


def test_a_lock_replaces_even_an_off_keyboard_key():
    typed = "".join(SIX[:5]) + "🍔"
    assert parse_guess(typed, FRUIT, {5: CHERRY}) == (*SIX[:5], CHERRY)


def test_a_lock_is_spelled_as_on_the_keyboard():
    keyboard = Keyboard.of((APPLE, HEART))
    assert parse_guess(BLANK + APPLE * 5, keyboard, {0: "\u2764"}) == (HEART, *(APPLE,) * 5)


@pytest.mark.parametrize(
    "locks",
    [{-1: APPLE}, {6: APPLE}, {True: APPLE}, {"0": APPLE}, {0: "🍔"}, {0: "a"}, {0: None}, [(0, APPLE)]],
)
def test_a_bad_lock_is_the_callers_error_not_the_players(locks):
    with pytest.raises(InvalidInput) as raised:
        parse_guess("".join(SIX), FRUIT, locks)
    assert not isinstance(raised.value, InvalidGuess)


# -- parse_guess: every problem --------------------------------------------------------------------------


@pytest.mark.parametrize("guess", [None, 7, 6.0, b"abc", [APPLE, 7], [b"x"], {APPLE: 1}, {APPLE}, range(6)])
def test_not_text(guess):
    assert problem_of(guess)[0] == "not_text"


def test_too_long_is_counted_in_code_points_before_segmenting():
    assert problem_of(BLANK * (MAX_GUESS_CHARS + 1))[0] == "too_long"
    assert problem_of(APPLE * (MAX_GUESS_CHARS + 1))[0] == "too_long"
    assert problem_of(FAMILY * 60)[0] == "too_long"  # 60 clusters, but 300 code points
    assert problem_of(BLANK * MAX_GUESS_CHARS)[0] == "wrong_length"  # at the limit: segmented
    assert problem_of([APPLE] * (MAX_GUESS_CHARS + 1))[0] == "too_long"
    assert problem_of([FAMILY] * 52)[0] == "too_long"


@pytest.mark.parametrize("guess", ["", [], ()])
def test_empty(guess):
    assert problem_of(guess)[0] == "empty"


@pytest.mark.parametrize(
    "bad", ["\x00", "\n", "\r", "\t", "\x1b", "\x7f", "\u202e", "\u200b", "\u2066", "\ufeff", "\ud800"]
)
def test_control(bad):
    problem, message = problem_of(APPLE * 3 + bad + APPLE * 3)
    assert problem == "control"
    assert f"U+{ord(bad):04X}" in message
    assert problem_of([APPLE, PEAR + bad, *SIX[2:]])[0] == "control"


def test_zwj_vs16_and_tags_are_not_control():
    keyboard = Keyboard.of((APPLE, FAMILY, HEART, ENGLAND))
    expected = (FAMILY, HEART, ENGLAND, APPLE, APPLE, APPLE)
    assert parse_guess("".join(expected), keyboard) == expected


@pytest.mark.parametrize("space", [" ", "\u00a0", "\u3000", "\u2003", "\u2028"])
def test_whitespace(space):
    problem, message = problem_of(space.join(SIX))
    assert problem == "whitespace"
    assert "without spaces" in message
    assert problem_of("".join(SIX) + space)[0] == "whitespace"
    assert problem_of([APPLE + space, *SIX[1:]])[0] == "whitespace"


@pytest.mark.parametrize(("count", "found"), [(1, "1 was found"), (5, "5 were found"), (7, "7 were found")])
def test_wrong_length(count, found):
    problem, message = problem_of(APPLE * count)
    assert problem == "wrong_length"
    assert "6 emoji" in message
    assert found in message
    assert problem_of([APPLE] * count)[0] == "wrong_length"


def test_a_multi_emoji_item_of_a_sequence_is_one_slot():
    problem, message = problem_of([APPLE + PEAR, *SIX[1:]])
    assert problem == "off_keyboard"
    assert "position 1" in message


def test_off_keyboard_names_the_keys_and_positions():
    problem, message = problem_of("".join(SIX[:4]) + "🍔" + "a")
    assert problem == "off_keyboard"
    assert "🍔 at position 5" in message
    assert "a at position 6" in message
    problem, message = problem_of(["🍔", *SIX[1:]])
    assert (problem, "🍔 at position 1" in message) == ("off_keyboard", True)


def test_off_keyboard_parts_of_a_key_are_not_the_key():
    keyboard = Keyboard.of((APPLE, FAMILY, THUMBS_MEDIUM))
    assert problem_of("\U0001f468" + APPLE * 5, keyboard)[0] == "off_keyboard"  # the man, not the family
    assert problem_of("\U0001f44d" + APPLE * 5, keyboard)[0] == "off_keyboard"  # no skin tone


def test_blank_at_an_unlocked_position():
    problem, message = problem_of(BLANK + "".join(SIX[1:]))
    assert problem == "blank"
    assert "position 1 " in message
    problem, message = problem_of([None, *SIX[1:4], "", BLANK], locks={0: APPLE})
    assert problem == "blank"
    assert "positions 5, 6" in message


def test_only_blanks_without_locks_is_blank_not_empty():
    assert problem_of(BLANK * 6)[0] == "blank"
    assert problem_of([None] * 6)[0] == "blank"


def test_the_check_order():
    """not_text, too_long, empty, control, whitespace, wrong_length, then off_keyboard before blank."""
    assert problem_of([None, 3])[0] == "not_text"
    assert problem_of("\x00" * (MAX_GUESS_CHARS + 1))[0] == "too_long"
    assert problem_of(" \n" + APPLE)[0] == "control"
    assert problem_of(" " + "🍔" * 3)[0] == "whitespace"
    assert problem_of("🍔" * 5)[0] == "wrong_length"
    assert problem_of("🍔" + BLANK + APPLE * 4)[0] == "off_keyboard"
    assert problem_of(BLANK + "🍔" + APPLE * 4)[0] == "off_keyboard"


def test_the_check_order_of_locks_first():
    """A caller's bad lock is reported even when the player's guess is bad too."""
    with pytest.raises(InvalidInput) as raised:
        parse_guess("", FRUIT, {9: APPLE})
    assert not isinstance(raised.value, InvalidGuess)


def test_parse_guess_needs_a_keyboard():
    with pytest.raises(InvalidInput):
        parse_guess("".join(SIX), FRUIT.keys)


# -- properties --------------------------------------------------------------------------------------------

KEYBOARD_KEYS = st.lists(
    st.sampled_from((*EMOJI_POOL, *TRICKY, HEART_ON_FIRE, ASTRONAUT)), min_size=MIN_SIZE, max_size=MAX_SIZE
).map(lambda keys: tuple(dict.fromkeys(keys)))
KEYBOARDS = KEYBOARD_KEYS.filter(lambda keys: len(keys) >= MIN_SIZE).map(Keyboard.of)


@given(KEYBOARDS, st.data())
def test_six_keys_of_a_keyboard_joined_parse_back(keyboard, data):
    guess = tuple(data.draw(st.lists(st.sampled_from(keyboard.keys), min_size=6, max_size=6)))
    assert parse_guess("".join(guess), keyboard) == guess
    assert parse_guess(guess, keyboard) == guess


@given(KEYBOARDS, st.data())
def test_locks_overlay_exactly_their_positions(keyboard, data):
    keys = st.sampled_from(keyboard.keys)
    guess = data.draw(st.lists(keys, min_size=6, max_size=6))
    locks = data.draw(st.dictionaries(st.integers(0, 5), keys))
    typed = [BLANK if i in locks and data.draw(st.booleans()) else key for i, key in enumerate(guess)]
    expected = tuple(locks.get(i, key) for i, key in enumerate(guess))
    assert parse_guess("".join(typed), keyboard, locks) == expected


@given(KEYBOARDS)
def test_a_keyboard_round_trips_through_its_text(keyboard):
    assert Keyboard.of(keyboard.text()) == keyboard
    assert all(is_emoji(key) for key in keyboard)


@pytest.mark.parametrize("module", ["engine", "emoji", "keyboard", "codes", "ranking"])
def test_the_pure_modules_import_only_the_stdlib_regex_errors_and_each_other(module):
    """No Redis, no queue, no web: the game rules stay pure."""
    path = pathlib.Path(kb.__file__).with_name(f"{module}.py")
    imported = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    pure = {"codemojex.errors", "codemojex.emoji", "codemojex.keyboard"}
    allowed = {"regex", *pure} | set(sys.stdlib_module_names)
    assert {name for name in imported if name.split(".")[0] not in sys.stdlib_module_names} <= allowed
    assert not any(name.split(".")[0] in {"redis", "echomq", "fastapi", "starlette"} for name in imported)

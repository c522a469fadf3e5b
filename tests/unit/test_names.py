"""codemojex.names: which display names may be shown, and when two names are one name."""

from __future__ import annotations

import random

import pytest

from codemojex.errors import InvalidName
from codemojex.names import MAX_NAME, check_name, skeleton, variants


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("  Ada  ", "Ada"),
        ("Jose\u0301", "Jos\u00e9"),  # NFC composes
        ("\uff21\uff44\uff41", "Ada"),  # NFKC: full-width letters
        ("\ufb01sh", "fish"),  # NFKC: a ligature
        ("Vi\u1ec7t", "Vi\u1ec7t"),  # two marks on one letter is Vietnamese, not zalgo
        ("Ada \U0001f469\u200d\U0001f4bb", "Ada \U0001f469\u200d\U0001f4bb"),  # ZWJ inside an emoji
        ("\u2764\ufe0f", "\u2764\ufe0f"),  # an emoji with its variation selector
        ("x" * MAX_NAME, "x" * MAX_NAME),
    ],
)
def test_a_good_name_is_shown_normalised(typed, shown):
    assert check_name(typed) == shown


@pytest.mark.parametrize(
    "name",
    [
        "",
        " \t ",
        "x" * (MAX_NAME + 1),
        "\ud800",
        "\u3164",
        "\u2800",
        "\u115f",
        "\u1160",
        "\uffa0",
        "\u200b",
        "\u2060",
        "\u200d",
        "\ufe0f",
        "\U000e0100",
        "\u0301",
        "a\u0301\u0302\u0303",
        "\u00e1\u0302\u0303",  # a precomposed letter's own mark counts
        "bidi\u202e",
        "\U0010fffd",
        "\u0378",  # unassigned
    ],
)
def test_an_empty_invisible_or_zalgo_name_is_invalid(name):
    with pytest.raises(InvalidName):
        check_name(name)


@pytest.mark.parametrize(
    "look_alike",
    [
        "bob",
        "BOB",
        "B0B",
        "B\u043eb",  # a Cyrillic o
        "\u0392\u039f\u0392",  # Greek capitals
        "\uff22ob",  # a full-width B
        "Bob\ufe0f",
        "Bo\u200db",
    ],
)
def test_look_alike_names_share_a_skeleton(look_alike):
    assert skeleton(look_alike) == skeleton("Bob") == "bob"


def test_the_skeleton_folds_spaces_and_maps_1_to_l():
    assert skeleton("Ada   Lovelace") == skeleton("ada lovelace")
    assert skeleton("A1ice") == skeleton("Alice")
    assert skeleton("Bobby") != skeleton("Bob")


def test_variants_are_valid_names_that_do_not_pass_for_the_name():
    for name in ["Bob", "a" * 32, "Ada 👩‍💻", "Jos\u00e9"]:
        offered = variants(name, random.Random(7))
        assert len(offered) >= 8
        assert offered[:4] == [f"{check_name(name)[: MAX_NAME - 2].rstrip()} {n}" for n in (2, 3, 4, 5)]
        for candidate in offered:
            assert check_name(candidate) == candidate
            assert len(candidate) <= MAX_NAME
            assert skeleton(candidate) != skeleton(name)
        assert len({skeleton(candidate) for candidate in offered}) == len(offered)

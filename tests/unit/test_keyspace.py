"""echomq.keyspace: every key of a bus under ``emq:{tag}:``, in one cluster slot, built from checked input."""

from __future__ import annotations

import dataclasses
from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from echomq import ids
from echomq.errors import InvalidId, InvalidLane, InvalidTag
from echomq.keyspace import Keyspace, check_lane, check_tag

FIXED = ("ring", "active", "delayed", "done", "dead", "wake", "stats", "sweep_lock")
TAGS = st.from_regex(r"[A-Za-z0-9_.-]{1,32}", fullmatch=True)
LANES = st.from_regex(r"[A-Za-z0-9_.:-]{1,128}", fullmatch=True)


def _all_keys(keys: Keyspace, lane: str = "PLR1") -> list[str]:
    return [keys.job(ids.mint("JOB")), keys.lane(lane), *(getattr(keys, name) for name in FIXED)]


def test_every_key_is_under_the_braced_tag():
    """Every key a bus builds starts with emq:{tag}: and matches the bus's SCAN pattern."""
    keys = Keyspace("cm")
    assert keys.prefix == "emq:{cm}:"
    for key in _all_keys(keys):
        assert key.startswith("emq:{cm}:")
        assert fnmatchcase(key, keys.pattern)


def test_key_names_follow_the_documented_layout():
    """The keys are job:<JOB>, lane:<lane>, ring, active, delayed, done, dead, wake, stats, sweep:lock."""
    keys = Keyspace("cm")
    job = ids.mint("JOB")
    assert keys.job(job) == f"emq:{{cm}}:job:{job}"
    assert keys.lane("PLR1") == "emq:{cm}:lane:PLR1"
    assert [getattr(keys, name) for name in FIXED] == [
        "emq:{cm}:ring",
        "emq:{cm}:active",
        "emq:{cm}:delayed",
        "emq:{cm}:done",
        "emq:{cm}:dead",
        "emq:{cm}:wake",
        "emq:{cm}:stats",
        "emq:{cm}:sweep:lock",
    ]


def test_keys_of_two_buses_do_not_overlap():
    """Two tags give disjoint keys, and neither bus's pattern matches the other's keys."""
    one, two = Keyspace("a"), Keyspace("ab")
    for key in _all_keys(one):
        assert not fnmatchcase(key, two.pattern)
    for key in _all_keys(two):
        assert not fnmatchcase(key, one.pattern)


def test_all_keys_of_a_bus_hash_to_one_cluster_slot():
    """Every key of one bus hashes to the slot of its tag, so multi-key scripts work on a cluster."""
    for tag in ("cm", "t1", "a.b-c_d", "x" * 32):
        keys = Keyspace(tag)
        slots = {key_slot(key.encode()) for key in _all_keys(keys)}
        assert slots == {key_slot(tag.encode())}


@given(TAGS, LANES)
def test_any_valid_tag_and_lane_stay_in_one_slot(tag, lane):
    """For any valid tag and lane name, every key of the bus is in the tag's cluster slot."""
    keys = Keyspace(tag)
    assert {key_slot(key.encode()) for key in _all_keys(keys, lane)} == {key_slot(tag.encode())}


def test_job_refuses_an_ill_formed_id():
    """job() raises InvalidId on an id of the wrong length, case or alphabet."""
    keys = Keyspace("cm")
    good = ids.mint("JOB")
    for bad in (good[:-1], good + "0", good.lower(), good[:-1] + "U", "", "JOB", "../../etc"):
        with pytest.raises(InvalidId):
            keys.job(bad)


def test_job_refuses_a_non_job_brand():
    """job() raises InvalidId on a well-formed id of another brand (PLR, GES)."""
    keys = Keyspace("cm")
    job = ids.mint("JOB")
    for other in (ids.mint("PLR"), ids.rebrand(job, "GES")):
        with pytest.raises(InvalidId, match="expected a JOB id"):
            keys.job(other)


@pytest.mark.parametrize("bad", [None, 7, b"JOB", ["JOB"]])
def test_job_refuses_a_non_str(bad):
    """job() raises InvalidId when the id is not a str."""
    with pytest.raises(InvalidId):
        Keyspace("cm").job(bad)


BAD_LANES = [
    ("empty", ""),
    ("open brace", "a{b"),
    ("close brace", "a}b"),
    ("both braces", "{cm}"),
    ("space", "a b"),
    ("newline", "a\nb"),
    ("trailing newline", "ab\n"),
    ("tab", "a\tb"),
    ("star", "a*"),
    ("slash", "a/b"),
    ("non-ascii", "café"),
    ("too long", "x" * 129),
]


@pytest.mark.parametrize(("why", "lane"), BAD_LANES, ids=[why for why, _ in BAD_LANES])
def test_lane_refuses_an_ill_formed_name(why, lane):
    """lane() raises InvalidLane on a name that is empty, too long or outside [A-Za-z0-9_.:-]."""
    with pytest.raises(InvalidLane):
        Keyspace("cm").lane(lane)
    with pytest.raises(InvalidLane):
        check_lane(lane)


@pytest.mark.parametrize("lane", [None, 1, b"PLR", ("PLR",)])
def test_lane_refuses_a_non_str(lane):
    """lane() raises InvalidLane when the name is not a str."""
    with pytest.raises(InvalidLane):
        Keyspace("cm").lane(lane)


def test_lane_accepts_the_documented_alphabet_up_to_128_characters():
    """A lane name of 1-128 characters of [A-Za-z0-9_.:-] is accepted as given."""
    for lane in ("a", "PLR" + ids.mint("PLR")[3:], "a.b:c-d_e", "x" * 128, "0"):
        assert check_lane(lane) == lane
        assert Keyspace("cm").lane(lane).endswith(":lane:" + lane)


def test_long_lane_is_shown_shortened_in_the_error():
    """The error for a very long lane name does not echo the whole name."""
    with pytest.raises(InvalidLane) as caught:
        check_lane("x" * 5_000)
    assert len(str(caught.value)) < 300


BAD_TAGS = [
    ("empty", ""),
    ("open brace", "c{m"),
    ("close brace", "cm}"),
    ("space", "c m"),
    ("newline", "cm\n"),
    ("colon", "c:m"),
    ("star", "c*"),
    ("too long", "x" * 33),
]


@pytest.mark.parametrize(("why", "tag"), BAD_TAGS, ids=[why for why, _ in BAD_TAGS])
def test_tag_refuses_an_ill_formed_name(why, tag):
    """Keyspace(tag) raises InvalidTag on a tag that is empty, too long or outside [A-Za-z0-9_.-]."""
    with pytest.raises(InvalidTag):
        Keyspace(tag)
    with pytest.raises(InvalidTag):
        check_tag(tag)


@pytest.mark.parametrize("tag", [None, 1, b"cm"])
def test_tag_refuses_a_non_str(tag):
    """Keyspace(tag) raises InvalidTag when the tag is not a str."""
    with pytest.raises(InvalidTag):
        Keyspace(tag)


def test_keyspace_is_immutable():
    """A Keyspace cannot be retargeted after construction (its prefix is derived once)."""
    keys = Keyspace("cm")
    with pytest.raises(dataclasses.FrozenInstanceError):
        keys.tag = "other"  # type: ignore[misc]


def test_a_tombstone_is_placed_by_the_id_s_mint_time_and_named_by_the_rest_in_bytes():
    """A JOB id's tombstone is in the hash of its first 7 body digits, under the other 16 as 10 bytes,
    and the id is read back from the two."""
    keys = Keyspace("cm")
    job = ids.mint("JOB")
    key, field = keys.tombstone(job)
    assert key == f"emq:{{cm}}:tomb:{job[3:10]}"
    assert len(field) == 10
    assert keys.tombstone_job(key.encode(), field) == job

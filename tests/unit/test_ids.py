"""echomq.ids: branded ids whose mint order is byte order is sort order, parsed strictly."""

from __future__ import annotations

import threading
import time
from itertools import pairwise
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from echomq import ids
from echomq.errors import InvalidId, InvalidInput

BODIES = st.binary(min_size=ids.BODY_BYTES, max_size=ids.BODY_BYTES)
BRANDS = st.from_regex(r"[A-Z]{3}", fullmatch=True)


def _valid() -> str:
    return ids.mint("JOB")


# -- minting ---------------------------------------------------------------------------------------


def test_mint_is_strictly_increasing_in_a_tight_loop():
    """Ids minted back to back (many per millisecond) are unique and strictly increasing."""
    minted = [ids.mint("JOB") for _ in range(20_000)]
    assert all(a < b for a, b in pairwise(minted))
    assert len(set(minted)) == len(minted)


def test_mint_is_strictly_increasing_in_body_bytes_too():
    """The bodies of successive mints increase as bytes, so the text order is the byte order."""
    bodies = [ids.body(ids.mint("JOB")) for _ in range(5_000)]
    assert all(a < b for a, b in pairwise(bodies))


def test_mint_across_threads_is_unique_and_increasing_per_thread():
    """Threads minting at once get unique ids, each thread's strictly increasing in mint order."""
    per_thread: dict[int, list[str]] = {}
    start = threading.Barrier(8)

    def work(n: int) -> None:
        start.wait()
        per_thread[n] = [ids.mint("JOB") for _ in range(3_000)]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [job for minted in per_thread.values() for job in minted]
    assert len(set(everything)) == len(everything) == 8 * 3_000
    ordered = sorted(everything)
    for minted in per_thread.values():
        assert all(a < b for a, b in pairwise(minted))
        mine = set(minted)
        assert [job for job in ordered if job in mine] == minted


def test_mint_within_one_millisecond_adds_one_to_the_entropy(monkeypatch):
    """Within one millisecond the body keeps its time bytes and its entropy grows by exactly one."""
    monkeypatch.setattr("echomq.ids.time", SimpleNamespace(time_ns=lambda: 1_700_000_000_123_000_000))
    minter = ids._Minter()
    first, second, third = (minter.next_body() for _ in range(3))
    assert first[:6] == second[:6] == third[:6] == (1_700_000_000_123).to_bytes(6, "big")
    entropy = [int.from_bytes(b[6:], "big") for b in (first, second, third)]
    assert entropy[1] == entropy[0] + 1
    assert entropy[2] == entropy[1] + 1


def test_mint_stays_increasing_when_the_clock_steps_back(monkeypatch):
    """A wall clock stepped backwards does not make a later id sort before an earlier one."""
    clock = iter([5_000, 4_000, 3_000, 5_000, 6_000])
    monkeypatch.setattr("echomq.ids.time", SimpleNamespace(time_ns=lambda: next(clock) * 1_000_000))
    minter = ids._Minter()
    bodies = [minter.next_body() for _ in range(5)]
    assert all(a < b for a, b in pairwise(bodies))
    assert [int.from_bytes(b[:6], "big") for b in bodies] == [5_000, 5_000, 5_000, 5_000, 6_000]


def test_mint_borrows_the_next_millisecond_when_entropy_runs_out(monkeypatch):
    """When the entropy would overflow within one millisecond, the body moves to the next one."""
    monkeypatch.setattr("echomq.ids.time", SimpleNamespace(time_ns=lambda: 9_000 * 1_000_000))
    minter = ids._Minter()
    first = minter.next_body()
    minter._entropy = (1 << 64) - 1
    second = minter.next_body()
    assert int.from_bytes(second[:6], "big") == 9_001
    assert first < second


def test_mint_records_the_time_it_was_minted():
    """timestamp_ms of a fresh id is the wall clock at the mint, in Unix milliseconds."""
    before = time.time_ns() // 1_000_000
    job = ids.mint("JOB")
    after = time.time_ns() // 1_000_000
    assert before <= ids.timestamp_ms(job) <= after


def test_mint_refuses_a_bad_brand():
    """Minting with a brand that is not three upper-case letters raises InvalidId."""
    for brand in ("job", "JO", "JOBS", "J0B", "", None):
        with pytest.raises(InvalidId):
            ids.mint(brand)  # type: ignore[arg-type]


# -- the text form ---------------------------------------------------------------------------------


def test_text_form_is_brand_and_23_crockford_digits():
    """An id is 26 characters: the brand, then 23 digits of Crockford base32, the first 0-3."""
    job = ids.mint("PLR")
    assert len(job) == ids.TEXT_LENGTH == 26
    assert job[:3] == "PLR"
    assert set(job[3:]) <= set(ids.ALPHABET)
    assert job[3] in "0123"


def test_extreme_bodies_encode_to_the_extreme_texts():
    """The all-zero body is all '0' digits and the all-ones body is '3' then 22 'Z' digits."""
    assert ids.from_body("JOB", bytes(14)) == "JOB" + "0" * 23
    assert ids.from_body("JOB", b"\xff" * 14) == "JOB3" + "Z" * 22


def test_alphabet_sorts_like_ascii():
    """The digit alphabet is in ASCII order, which is why text order can equal byte order."""
    assert list(ids.ALPHABET) == sorted(ids.ALPHABET)
    assert len(set(ids.ALPHABET)) == 32
    assert not set("ILOU") & set(ids.ALPHABET)


def test_text_sorts_like_the_bytes_of_the_body():
    """Sorting minted and random ids as text gives the same order as sorting their bodies as bytes."""
    import secrets  # noqa: PLC0415  (local: only this test needs random bodies)

    texts = [ids.mint("JOB") for _ in range(200)]
    texts += [ids.from_body("JOB", secrets.token_bytes(14)) for _ in range(800)]
    assert sorted(texts) == sorted(texts, key=ids.body)


@given(BODIES, BODIES)
def test_text_order_equals_byte_order_for_any_bodies(a, b):
    """For any two bodies, the text ids compare exactly as the bodies compare as bytes."""
    ta, tb = ids.from_body("JOB", a), ids.from_body("JOB", b)
    assert (ta < tb) == (a < b)
    assert (ta == tb) == (a == b)


@given(BRANDS, BODIES)
def test_parse_inverts_from_body(brand, body):
    """parse(from_body(brand, body)) gives back the brand and the body, and the text is valid."""
    text = ids.from_body(brand, body)
    assert ids.parse(text) == (brand, body)
    assert ids.parse(text, brand) == (brand, body)
    assert ids.is_valid(text, brand)
    assert ids.check(text, brand) == text


def test_round_trip_of_a_minted_id():
    """A minted id parses to its brand and body, and from_body rebuilds the same text."""
    job = ids.mint("JOB")
    brand, body = ids.parse(job)
    assert brand == "JOB"
    assert len(body) == 14
    assert ids.from_body(brand, body) == job


def test_brand_body_rebrand_and_timestamp():
    """brand_of, body, rebrand and timestamp_ms read the parts; rebrand keeps the body."""
    body = (1_234_567).to_bytes(6, "big") + bytes(range(8))
    job = ids.from_body("JOB", body)
    ges = ids.rebrand(job, "GES")
    assert ids.brand_of(job) == "JOB"
    assert ids.brand_of(ges) == "GES"
    assert ids.body(job) == ids.body(ges) == body
    assert ges == "GES" + job[3:]
    assert ids.timestamp_ms(job) == ids.timestamp_ms(ges) == 1_234_567
    assert ids.rebrand(ges, "JOB") == job


def test_rebrand_refuses_a_bad_brand_or_id():
    """rebrand raises InvalidId on an ill-formed id or target brand."""
    with pytest.raises(InvalidId):
        ids.rebrand(_valid(), "ges")
    with pytest.raises(InvalidId):
        ids.rebrand("JOB123", "GES")


# -- strict parsing --------------------------------------------------------------------------------


def _ill_formed() -> list[tuple[str, object]]:
    good = _valid()
    return [
        ("lower-case body", good[:3] + good[3:].lower()),
        ("lower-case brand", good[:3].lower() + good[3:]),
        ("one digit short", good[:-1]),
        ("one digit long", good + "0"),
        ("letter I", good[:-1] + "I"),
        ("letter L", good[:-1] + "L"),
        ("letter O", good[:-1] + "O"),
        ("letter U", good[:-1] + "U"),
        ("first digit 4", good[:3] + "4" + good[4:]),
        ("first digit 7", good[:3] + "7" + good[4:]),
        ("first digit 8", good[:3] + "8" + good[4:]),
        ("first digit Z", good[:3] + "Z" + good[4:]),
        ("digit in the brand", "J0B" + good[3:]),
        ("two-letter brand", good[1:]),
        ("four-letter brand", "X" + good),
        ("space", good[:10] + " " + good[11:]),
        ("trailing newline", good + "\n"),
        ("empty", ""),
        ("brand only", "JOB"),
        ("non-ascii digit", good[:-1] + "\u0660"),
    ]


@pytest.mark.parametrize(("why", "text"), _ill_formed(), ids=[why for why, _ in _ill_formed()])
def test_parse_refuses_ill_formed_text(why, text):
    """parse raises InvalidId (an InvalidInput) on a wrong length, alphabet, case or first digit."""
    with pytest.raises(InvalidId):
        ids.parse(text)
    assert not ids.is_valid(text)
    assert issubclass(InvalidId, InvalidInput)


@pytest.mark.parametrize("value", [None, 1, 1.5, b"JOB00000000000000000000000", ["JOB"], object()])
def test_parse_refuses_a_non_str(value):
    """parse raises InvalidId when given anything but a str (bytes included)."""
    with pytest.raises(InvalidId, match="is a str"):
        ids.parse(value)
    assert not ids.is_valid(value)


def test_parse_refuses_another_brand_when_one_is_asked():
    """parse(text, brand) raises InvalidId when the id is well formed but of another brand."""
    player = ids.mint("PLR")
    assert ids.parse(player)[0] == "PLR"
    with pytest.raises(InvalidId, match="expected a JOB id"):
        ids.parse(player, "JOB")
    with pytest.raises(InvalidId):
        ids.check(player, "JOB")
    assert not ids.is_valid(player, "JOB")


def test_parse_refuses_an_ill_formed_expected_brand():
    """parse(text, brand) raises InvalidId when the expected brand itself is ill-formed."""
    with pytest.raises(InvalidId):
        ids.parse(_valid(), "job")


def test_long_garbage_is_shown_shortened_in_the_error():
    """The error message of a very long ill-formed id is shortened, not echoed whole."""
    with pytest.raises(InvalidId) as caught:
        ids.parse("X" * 10_000)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize(
    ("brand", "body"),
    [("JOB", bytes(13)), ("JOB", bytes(15)), ("JOB", bytearray(14)), ("JOB", "0" * 14), ("jo", bytes(14))],
)
def test_from_body_refuses_a_bad_body_or_brand(brand, body):
    """from_body raises InvalidId unless the body is 14 bytes and the brand three letters."""
    with pytest.raises(InvalidId):
        ids.from_body(brand, body)


@pytest.mark.parametrize("brand", ["", "A", "AB", "ABCD", "abc", "AbC", "A1C", "ÀBC", None, 123])
def test_check_brand_refuses_anything_but_three_capitals(brand):
    """check_brand raises InvalidId unless the brand is exactly three letters A-Z."""
    with pytest.raises(InvalidId):
        ids.check_brand(brand)


def test_check_brand_returns_a_good_brand():
    """check_brand returns a well-formed brand unchanged."""
    assert ids.check_brand("GES") == "GES"

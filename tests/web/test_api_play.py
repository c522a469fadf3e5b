"""What players of this kind of game expect, over real HTTP with a real worker process: keyboard marks
and the share grid with the player's guesses, the player's stats, a solve notice to everyone watching."""

from __future__ import annotations

from tests.support.web import open_round, secret_of, wait_until
from tests.web.test_api_events_metrics import EventReader

SQUARES = str.maketrans({"H": "🟩", "N": "🟨", "-": "⬜"})
ZEROS = {"played": 0, "solved": 0, "best_attempts": None, "current_streak": 0, "best_streak": 0}


def scored(client, path, count):
    listed = client.get(path).json()
    states = [g["state"] for g in listed["guesses"]]
    return listed if len(states) == count and set(states) == {"scored"} else None


def test_my_guesses_carry_keyboard_marks_and_the_share_grid(
    served, operator, join, score_worker, sync_redis, tag
):
    """After a scored guess: the keys it proved in or out, and the grid of squares (no emoji, no secret)."""
    rid = open_round(operator)["round_id"]
    _, ada = join("Ada")
    path = f"/api/rounds/{rid}/guesses"
    before = ada.get(path).json()
    assert (before["keys"], before["share"]) == ({}, None)
    secret = secret_of(sync_redis, tag, rid)
    absent = next(key for key in before_keyboard(ada, rid) if key not in secret)
    guess = [secret[0], *[absent] * 5]
    ada.post(path, json={"guess": guess})
    listed = wait_until(lambda: scored(ada, path, 1), what="the guess scored")
    assert listed["keys"] == {secret[0]: "in", absent: "out"}
    squares = listed["guesses"][0]["feedback"]["code"].translate(
        str.maketrans({"H": "🟩", "N": "🟨", "-": "⬜"})
    )
    assert listed["share"] == f"Codemojex {rid} · 1 try, not solved\n{squares}"
    assert not set(secret) & set(listed["share"])


def before_keyboard(client, rid):
    return client.get(f"/api/rounds/{rid}").json()["keyboard"]


def test_my_stats_count_a_solved_round_and_are_mine_only(
    served, operator, join, score_worker, sync_redis, tag, anon
):
    """Zeros at first; one round solved in 1 is played 1, solved 1, best 1, streak 1; Bob's stay zero;
    no token, no stats."""
    rid = open_round(operator)["round_id"]
    ada_id, ada = join("Ada")
    _, bob = join("Bob")
    assert ada.get("/api/me/stats").json() == {"player_id": ada_id, **ZEROS}
    ada.post(f"/api/rounds/{rid}/guesses", json={"guess": secret_of(sync_redis, tag, rid)})
    wait_until(lambda: scored(ada, f"/api/rounds/{rid}/guesses", 1), what="the guess scored")
    stats = ada.get("/api/me/stats").json()
    assert stats == {"player_id": ada_id, "played": 1, "solved": 1, "best_attempts": 1, "current_streak": 1,
                     "best_streak": 1}  # fmt: skip
    assert {k: v for k, v in bob.get("/api/me/stats").json().items() if k != "player_id"} == ZEROS
    assert anon.get("/api/me/stats").status_code == 401


def test_a_solve_is_announced_to_everyone_watching_the_round(
    served, operator, join, score_worker, sync_redis, tag
):
    """Bob watches; Ada solves in 2: Bob's stream says who, in how many attempts and at what rank, and
    nothing of the guess or the secret. (Her second guess is sent once the first is scored: a notice
    tells the standing at the moment of its own scoring, so two guesses of one player scored at once,
    out of order, would announce the fold so far: see the closing note of issue 16.)"""
    rid = open_round(operator)["round_id"]
    ada_id, ada = join("Ada")
    _, bob = join("Bob")
    ticket = bob.post("/api/events/ticket", json={"round_id": rid}).json()["ticket"]
    reader = EventReader(f"{served.url}/api/events?ticket={ticket}")
    try:
        reader.next("hello")
        secret = secret_of(sync_redis, tag, rid)
        ada.post(f"/api/rounds/{rid}/guesses", json={"guess": list(reversed(secret))})
        wait_until(lambda: scored(ada, f"/api/rounds/{rid}/guesses", 1), what="the first guess scored")
        ada.post(f"/api/rounds/{rid}/guesses", json={"guess": secret})
        notice = reader.next("solved")
        assert notice == {"round_id": rid, "player_id": ada_id, "name": "Ada", "attempts": 2, "rank": 1}
    finally:
        reader.close()

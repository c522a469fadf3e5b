"""The lobby and the history over real HTTP (:mod:`codemojex.web.history_api`), with a real worker
process concluding closed rounds: every open round is listed with its close time and the server's
clock; a closed round's summary (secret, final board) is in the history with the caller's own guesses
only; the close is announced once on the event stream with the winners; hostile input is refused."""

from __future__ import annotations

import pytest

from tests.support.web import error_code, open_round, secret_of, wait_until
from tests.web.test_api_events_metrics import EventReader

WRONG = "🍎🍌🍇🍒🥝🍑"


def test_the_lobby_lists_every_open_round_with_its_close_time(served, operator, anon):
    first = open_round(operator, duration_s=600)
    second = open_round(operator)
    later = open_round(operator, delay_s=300)
    closed = open_round(operator)
    assert operator.post(f"/api/operator/rounds/{closed['round_id']}/close").status_code == 200
    lobby = anon.get("/api/lobby").json()
    assert [r["round_id"] for r in lobby["rounds"]] == [second["round_id"], first["round_id"]]
    assert [r["round_id"] for r in lobby["upcoming"]] == [later["round_id"]]
    by_id = {r["round_id"]: r for r in lobby["rounds"]}
    assert by_id[first["round_id"]]["closes_ms"] == first["opens_ms"] + 600_000
    assert by_id[second["round_id"]]["closes_ms"] is None
    assert all(r["secret"] is None for r in lobby["rounds"] + lobby["upcoming"])
    assert lobby["server_ms"] >= first["opens_ms"]


def _concluded(anon, round_id):
    reply = anon.get(f"/api/history/{round_id}")
    return reply.json() if reply.status_code == 200 else None


def test_a_closed_round_is_in_the_history_with_my_own_guesses_only(
    served, operator, join, anon, score_worker, sync_redis, tag
):
    the_round = open_round(operator)
    rid = the_round["round_id"]
    ada_id, ada = join("Ada")
    bob_id, bob = join("Bob")
    secret = "".join(secret_of(sync_redis, tag, rid))
    assert ada.post(f"/api/rounds/{rid}/guesses", json={"guess": WRONG}).status_code == 202
    assert ada.post(f"/api/rounds/{rid}/guesses", json={"guess": secret}).status_code == 202
    assert bob.post(f"/api/rounds/{rid}/guesses", json={"guess": WRONG}).status_code == 202
    wait_until(lambda: len(anon.get(f"/api/rounds/{rid}/leaderboard").json()["entries"]) == 2)
    assert anon.get(f"/api/history/{rid}").status_code == 404, "not in the history while open"
    assert operator.post(f"/api/operator/rounds/{rid}/close").status_code == 200
    public = wait_until(lambda: _concluded(anon, rid), what="the conclusion")
    summary = public["summary"]
    assert "".join(summary["secret"]) == secret
    assert [(w["name"], w["solved"]) for w in summary["winners"]] == [("Ada", True), ("Bob", False)]
    assert (summary["players"], summary["guesses"]) == (2, 3)
    assert public["guesses"] is None, "no token: no guesses"
    assert public["guesses_kept"] is True
    assert public["kept_until_ms"] > summary["closed_ms"]
    mine = ada.get(f"/api/history/{rid}", params={"player_id": bob_id}).json()["guesses"]
    assert ["".join(g["guess"]) for g in mine] == [WRONG, secret], "Ada's own, whatever the query says"
    theirs = bob.get(f"/api/history/{rid}").json()["guesses"]
    assert ["".join(g["guess"]) for g in theirs] == [WRONG]
    assert {g["job_id"] for g in theirs}.isdisjoint(g["job_id"] for g in mine)
    listed = anon.get("/api/history").json()["rounds"]
    assert [r["round_id"] for r in listed] == [rid]
    assert anon.get("/api/history", params={"before_ms": summary["closed_ms"]}).json() == {"rounds": []}
    cursor = {"before_ms": summary["closed_ms"], "before_round": rid}
    assert anon.get("/api/history", params=cursor).json() == {"rounds": []}, "past the last round: none"
    assert ada_id != bob_id


def test_the_close_is_announced_once_with_the_winners(served, operator, join, score_worker, sync_redis, tag):
    the_round = open_round(operator)
    rid = the_round["round_id"]
    _, ada = join("Ada")
    secret = "".join(secret_of(sync_redis, tag, rid))
    assert ada.post(f"/api/rounds/{rid}/guesses", json={"guess": secret}).status_code == 202
    ticket = ada.post("/api/events/ticket", json={"round_id": rid}).json()["ticket"]
    reader = EventReader(f"{served.url}/api/events?ticket={ticket}")
    try:
        reader.next("hello")
        assert operator.post(f"/api/operator/rounds/{rid}/close").status_code == 200
        closed = reader.next("closed")
        assert closed["round_id"] == rid
        assert "".join(closed["secret"]) == secret
        assert [(w["name"], w["solved"]) for w in closed["winners"]] == [("Ada", True)]
    finally:
        reader.close()
    kinds = [fields[b"kind"] for _, fields in sync_redis.xrange(f"cmx:{{{tag}}}:events:{rid}")]
    assert kinds.count(b"closed") == 1


@pytest.mark.parametrize("bad", ["nope", "RND", "PLR00T4D8CZQFHDN9MDMK25ZBR", "rnd00t4d8czqfhdn9mdmk25zbr"])
def test_a_bad_round_id_is_refused(served, anon, bad):
    reply = anon.get(f"/api/history/{bad}")
    assert reply.status_code == 400
    assert error_code(reply) == "invalid_id"


def test_an_unknown_round_and_bad_queries_and_tokens_are_refused(served, anon, operator):
    assert error_code(anon.get("/api/history/RND00T4D8CZQFHDN9MDMK25ZBR")) == "unknown_round"
    for params in ({"limit": 0}, {"limit": 101}, {"before_ms": -1}, {"limit": "x"}):
        assert anon.get("/api/history", params=params).status_code == 422
    for bad in ("nope", "PLR00T4D8CZQFHDN9MDMK25ZBR", "x" * 65):
        reply = anon.get("/api/history", params={"before_ms": 1, "before_round": bad})
        assert (reply.status_code, error_code(reply)) in {(400, "invalid_id"), (422, "malformed_body")}
    the_round = open_round(operator)
    reply = anon.get(f"/api/history/{the_round['round_id']}", headers={"Authorization": "Bearer not-a-token"})
    assert reply.status_code == 401


def test_the_lobby_lists_an_open_round_however_many_rounds_opened_after_it(served, operator, anon):
    """A day's round beside many short ones: still in the lobby after more rounds than the lobby's
    newest-rounds scan were opened after it (the live index lists it until its conclusion)."""
    long_round = open_round(operator, duration_s=3600)
    newer = [open_round(operator)["round_id"] for _ in range(55)]
    for round_id in newer:
        assert operator.post(f"/api/operator/rounds/{round_id}/close").status_code == 200
    listed = [r["round_id"] for r in anon.get("/api/lobby").json()["rounds"]]
    assert long_round["round_id"] in listed
    assert not set(newer) & set(listed)

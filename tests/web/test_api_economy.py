"""The economy over real HTTP: GET /api/wallet says, before the player types, what the next guess costs,
what the round's allowance will add at their first guess and what the next round's first guess will;
a broke player's guess is refused 402 as the offer predicted, changing nothing, and the next round's
first guess refills them by the rule."""

from __future__ import annotations

from codemojex.keys import GameKeys
from echomq.keyspace import Keyspace
from tests.support.probe import Probe
from tests.support.web import error_code, game_state, open_round

MISS = "🍍🍍🍍🍍🍍🍍"
PER_ROUND = 3 + 50 // 5
LEVEL = [{"currency": "ticket", "amount": 3}, {"currency": "coin", "amount": 50}]
TICKET = {"currency": "ticket", "amount": 1}


def snapshot(sync_redis, tag):
    out = dict(Probe(sync_redis, Keyspace(tag)).snapshot())
    out.update(Probe(sync_redis, GameKeys(tag)).snapshot())  # type: ignore[arg-type]
    return game_state(out)


def test_a_new_player_is_told_what_the_first_guess_gives_and_costs(served, operator, join):
    """No grant; the offer of the open round: the allowance to come, and a ticket as the next price."""
    the_round = open_round(operator)
    _, ada = join()
    body = ada.get("/api/wallet").json()
    assert body["balances"] == {}
    assert body["economy"] == {"allowance": LEVEL, "solve_reward": [{"currency": "coin", "amount": 25}]}
    offer = body["offer"]
    assert offer["round_id"] == the_round["round_id"]
    assert (offer["allowance_taken"], offer["top_up"], offer["next_price"]) == (False, LEVEL, TICKET)
    assert offer["rewarded"] is False
    assert offer["next_round"]["top_up"] == LEVEL
    path = f"/api/rounds/{the_round['round_id']}/guesses"
    assert ada.post(path, json={"guess": MISS}).json()["charged"] == TICKET
    after = ada.get(f"/api/wallet?round_id={the_round['round_id']}").json()
    assert after["balances"] == {"coin": 50, "ticket": 2}
    assert [e["reason"] for e in after["ledger"]] == ["allowance", "allowance", "guess"]
    assert (after["offer"]["allowance_taken"], after["offer"]["top_up"]) == (True, [])
    assert after["offer"]["next_round"]["top_up"] == [{"currency": "ticket", "amount": 1}]


def test_a_broke_player_is_predicted_refused_then_refilled_next_round(
    served, operator, sync_redis, tag, join
):
    """Thirteen guesses spend the round's allowance: the offer says no price, the 14th is 402 and changes
    nothing; in the next round the offer shows the top-up and the first guess is admitted."""
    first = open_round(operator)
    _, ada = join()
    path = f"/api/rounds/{first['round_id']}/guesses"
    for _ in range(PER_ROUND):
        assert ada.post(path, json={"guess": MISS}).status_code == 202
    offer = ada.get("/api/wallet").json()["offer"]
    assert offer["next_price"] is None
    assert offer["next_round"]["top_up"] == LEVEL
    before = snapshot(sync_redis, tag)
    refused = ada.post(path, json={"guess": MISS})
    assert (refused.status_code, error_code(refused)) == (402, "insufficient_funds")
    assert snapshot(sync_redis, tag) == before
    assert operator.post(f"/api/operator/rounds/{first['round_id']}/close").status_code == 200
    second = open_round(operator)
    offer = ada.get("/api/wallet").json()["offer"]
    assert (offer["round_id"], offer["top_up"], offer["next_price"]) == (second["round_id"], LEVEL, TICKET)
    admitted = ada.post(f"/api/rounds/{second['round_id']}/guesses", json={"guess": MISS})
    assert (admitted.status_code, admitted.json()["charged"]) == (202, TICKET)


def test_the_offer_of_a_named_round_and_of_no_round(served, operator, join):
    """No open round: no offer; a round named that does not exist is 404, an ill-formed id 400."""
    _, ada = join()
    assert ada.get("/api/wallet").json()["offer"] is None
    assert error_code(ada.get("/api/wallet?round_id=RND00000000000000000000000")) == "unknown_round"
    assert ada.get("/api/wallet?round_id=nope").status_code == 400


def test_the_offer_says_when_the_next_round_opens(served, operator, join):
    """A round scheduled for later is the next round: its open time is in the offer."""
    current = open_round(operator)
    later = open_round(operator, delay_s=600)
    _, ada = join()
    offer = ada.get("/api/wallet").json()["offer"]
    assert offer["round_id"] == current["round_id"]
    assert offer["next_round"]["opens_ms"] == later["opens_ms"]


def test_a_player_cannot_read_another_players_offer_or_write_an_allowance(served, operator, join):
    """The offer is the caller's own wallet, whatever is asked; no route credits an allowance or reward."""
    the_round = open_round(operator)
    _, ada = join()
    _, bob = join("Bob")
    ada.post(f"/api/rounds/{the_round['round_id']}/guesses", json={"guess": MISS})
    assert bob.get("/api/wallet").json()["offer"]["allowance_taken"] is False
    assert bob.get("/api/wallet?player_id=x").json()["balances"] == {}  # an unknown parameter is ignored
    paths = list(ada.get("/openapi.json").json()["paths"])
    assert not [path for path in paths if any(word in path for word in ("credit", "allowance", "reward"))]

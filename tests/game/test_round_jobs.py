"""The operator's open and close carried to the score worker as jobs (:mod:`codemojex.round_jobs`): the
host's call waits for the worker's answer and raises the same typed errors as a direct call; a
redelivered job opens no second round; a payload the host never writes is dead-lettered."""

from __future__ import annotations

import asyncio
import json

import pytest

from codemojex import round_jobs, rounds
from codemojex.errors import InvalidKeyboard, RoundClosed, Unavailable, UnknownRound
from codemojex.game import Game
from codemojex.score_worker import ScoreWorker
from echomq import Job, Permanent, ids
from tests.support.game import KEYBOARD


async def _serve_one(game: Game) -> None:
    """What a score worker does with one operator job: claim it, run it, complete it with its result."""
    scorer = ScoreWorker(game)
    while True:
        claims = await game.bus.claim(1, lease_ms=5000)
        if claims:
            result = await scorer.handle(Job(claims[0]))
            assert isinstance(result, bytes)
            await game.bus.complete(claims[0], result)
            return
        await asyncio.sleep(0.02)


async def test_the_host_opens_and_closes_through_the_worker_with_the_same_typed_errors(game):
    opened, _ = await asyncio.gather(round_jobs.open_round(game, keyboard=KEYBOARD), _serve_one(game))
    assert opened.keyboard.keys == tuple(KEYBOARD)
    closed, _ = await asyncio.gather(round_jobs.close_round(game, opened.id), _serve_one(game))
    assert (await rounds.get_round(game, opened.id)).closed_ms == closed
    assert list(await rounds.read_revealed(game, [opened.id])) == [await rounds.read_secret(game, opened.id)]
    with pytest.raises(RoundClosed):
        await asyncio.gather(round_jobs.close_round(game, opened.id), _serve_one(game))
    with pytest.raises(UnknownRound):
        await asyncio.gather(round_jobs.close_round(game, ids.mint("RND")), _serve_one(game))
    with pytest.raises(InvalidKeyboard):
        await asyncio.gather(round_jobs.open_round(game, keyboard=["x"]), _serve_one(game))


async def test_a_redelivered_open_opens_one_round(game):
    round_id = ids.mint("RND")
    payload = json.dumps({"op": "open", "round": round_id, "spec": {"keyboard": KEYBOARD}}).encode()
    await game.bus.enqueue(ids.mint("JOB"), lane=round_jobs.LANE, payload=payload)
    [claim] = await game.bus.claim(1)
    first = await round_jobs.handle(game, Job(claim))
    again = await round_jobs.handle(game, Job(claim))  # a crash before the ack: delivered again
    assert json.loads(first) == json.loads(again) == {"ok": {"round_id": round_id}}
    assert [r.id for r in await rounds.list_rounds(game)] == [round_id]


@pytest.mark.parametrize(
    "payload", [b"not json", b'{"op": "drop", "round": "RND00T4D8CZQFHDN9MDMK25ZBR"}', b'{"op": "open"}']
)
async def test_a_payload_the_host_never_writes_is_permanent(game, payload):
    await game.bus.enqueue(ids.mint("JOB"), lane=round_jobs.LANE, payload=payload)
    [claim] = await game.bus.claim(1)
    with pytest.raises(Permanent):
        await round_jobs.handle(game, Job(claim))


async def test_no_worker_answering_is_unavailable(game, monkeypatch):
    monkeypatch.setattr(round_jobs, "WAIT_S", 0.3)
    with pytest.raises(Unavailable, match="no score worker"):
        await round_jobs.close_round(game, ids.mint("RND"))


async def test_a_forged_operator_job_cannot_choose_the_secret(game):
    """A compromised host writes the operator lane's jobs itself: a spec naming the secret (or the round
    id under another name) is refused by the worker, nothing opened, and no secret of its choosing set."""
    for spec in ({"keyboard": KEYBOARD, "secret": KEYBOARD[:6]}, {"keyboard": KEYBOARD, "round_id": "x"}):
        round_id = ids.mint("RND")
        payload = json.dumps({"op": "open", "round": round_id, "spec": spec}).encode()
        await game.bus.enqueue(ids.mint("JOB"), lane=round_jobs.LANE, payload=payload)
        [claim] = await game.bus.claim(1)
        reply = json.loads(await round_jobs.handle(game, Job(claim)))
        assert reply["error"]["code"] == "invalid_option", reply
        with pytest.raises(UnknownRound):
            await rounds.get_round(game, round_id)
    assert await rounds.list_rounds(game) == []

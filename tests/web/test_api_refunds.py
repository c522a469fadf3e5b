"""The operator's refund of a dead guess over real HTTP: the payment back once, the ledger naming the JOB,
a repeat answered ``already``; only the operator may ask."""

from __future__ import annotations

import asyncio

from echomq import Bus
from tests.support.web import error_code, open_round, run, with_settings


def test_the_operator_refunds_a_dead_guess_once(serve_app, host_config, redis_server, tag, join):
    """A guess whose only try died is dead; the operator's refund credits its charge once, then `already`."""
    served = serve_app(with_settings(host_config, max_attempts=1))
    with served.client("operator-token-of-the-tests") as operator:
        round_id = open_round(operator)["round_id"]
        _, ada = join(on=served)
        job = ada.post(f"/api/rounds/{round_id}/guesses", json={"guess": "🍎🍌🍇🍒🥝🍑"}).json()["job_id"]

        async def die_on_its_only_try():
            async with Bus.from_url(redis_server.url, tag) as bus:
                [claim] = await bus.claim(1, lease_ms=100)  # a worker that dies holding it
                assert claim.job == job
                await asyncio.sleep(0.2)
                assert (await bus.sweep()).dead == 1

        run(die_on_its_only_try())
        path = f"/api/operator/dead/{job}/refund"
        assert ada.post(path).status_code == 403
        first = operator.post(path)
        assert first.status_code == 200, first.text
        assert first.json() == {
            "job_id": job, "outcome": "refunded", "refunded": {"currency": "ticket", "amount": 1}
        }  # fmt: skip
        assert operator.post(path).json()["outcome"] == "already"
        wallet = ada.get("/api/wallet").json()
        assert wallet["balances"] == {"coin": 50, "ticket": 3}
        mine = [(e["reason"], e["delta"]) for e in wallet["ledger"] if e["job_id"] == job]
        assert mine == [("guess", -1), ("refund", 1)]
        assert error_code(operator.post("/api/operator/dead/nope/refund")) == "invalid_id"

"""Durable admission of guesses (the bus's ``Settings.wait_replicas``): submit.lua goes through the bus's
durable wire, answered once a replica holds the charge and the job, on a real master and replica."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from codemojex import guesses, players, rounds, wallet
from codemojex.errors import NotDurable, ScriptError, Unavailable
from codemojex.game import Game
from codemojex.guesses import Outcome
from echomq import Bus, Settings, ids
from echomq.testing.server import RedisProcess
from tests.support.game import KEYBOARD, SECRET, text
from tests.support.workers import eventually

DURABLE = Settings(wait_replicas=1, wait_timeout_ms=300)
GUESS = ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑")


@pytest.fixture
def pair() -> Iterator[tuple[RedisProcess, RedisProcess]]:
    """A master and a server that is not yet its replica (:func:`follow` makes it one)."""
    with RedisProcess(appendonly=False) as master, RedisProcess(appendonly=False) as replica:
        yield master, replica


async def follow(replica: RedisProcess, master: RedisProcess) -> None:
    with redis.Redis(port=replica.port) as client:
        client.replicaof("127.0.0.1", master.port)
        await eventually(lambda: client.info("replication")["master_link_status"] == "up", what="in sync")


def guess_charges(held: wallet.Wallet) -> list[wallet.LedgerEntry]:
    return [entry for entry in held.ledger if entry.reason == "guess"]


async def test_a_guess_no_replica_acknowledged_is_not_durable_and_its_retry_is_a_duplicate(pair, tag):
    """Without a replica the admission runs on the master but is refused as NotDurable (an Unavailable);
    once a replica follows, the retry with the same job id is a duplicate with the first charge, and the
    wallet's ledger holds that one charge, on the replica too."""
    master, replica = pair
    async with Game(Bus.from_url(master.url, tag=tag, settings=DURABLE)) as game:
        the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
        ada = await players.register(game, "Ada")
        job = ids.mint("JOB")
        with pytest.raises(NotDurable) as caught:
            await guesses.submit(game, the_round.id, ada.id, text(GUESS), job_id=job)
        assert isinstance(caught.value, Unavailable)
        assert caught.value.code == "unavailable"  # to a client, a reason to retry like any other
        await follow(replica, master)
        again = await guesses.submit(game, the_round.id, ada.id, text(GUESS), job_id=job)
        assert (again.outcome, again.job, again.charged) == (Outcome.DUPLICATE, job, ("ticket", 1))
        assert len(guess_charges(await wallet.read_wallet(game, ada.id))) == 1
        with redis.Redis(port=replica.port) as client:
            assert client.exists(game.bus.keys.job(job)) == 1
            assert int(client.hget(game.bus.keys.stats, "durable") or 0) == 2  # both tries waited
    async with Game(Bus.from_url(replica.url, tag=tag)) as on_replica:
        assert len(guess_charges(await wallet.read_wallet(on_replica, ada.id))) == 1


async def test_a_durable_admission_is_on_the_replica_when_answered(pair, tag):
    """Admitted durably: the job and its charge are on the replica the moment submit answers."""
    master, replica = pair
    await follow(replica, master)
    async with Game(Bus.from_url(master.url, tag=tag, settings=DURABLE)) as game:
        the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
        ada = await players.register(game, "Ada")
        first = await guesses.submit(game, the_round.id, ada.id, text(GUESS))
        assert first.outcome is Outcome.ADMITTED
        with redis.Redis(port=replica.port) as client:
            assert client.exists(game.bus.keys.job(first.job)) == 1
            entries = client.lrange(game.keys.ledger(ada.id), 0, -1)
            assert any(first.job.encode() in entry for entry in entries)


async def test_a_script_error_reply_is_raised_as_without_durable_admission(pair, tag):
    """A submit.lua error reply (a foreign value under the game's wallet key) is a ScriptError on the
    durable wire, as on the plain path."""
    master, replica = pair
    await follow(replica, master)
    for settings in (DURABLE, Settings()):
        bus = Bus.from_url(master.url, tag=f"{tag}-{settings.wait_replicas}", settings=settings)
        async with Game(bus) as game:
            the_round = await rounds.open_round(game, keyboard=list(KEYBOARD), secret=list(SECRET))
            ada = await players.register(game, "Ada")
            await game.redis.set(game.keys.wallet(ada.id), b"not a hash")
            with pytest.raises(ScriptError):
                await guesses.submit(game, the_round.id, ada.id, text(GUESS))

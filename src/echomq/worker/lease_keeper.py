"""The lease keeper: renews every in-flight lease from its own thread, on its own blocking client.

A handler that blocks the event loop (a sync call inside an ``async def``, a long CPU step) must not lose
its lease for that reason alone, so extension does not run on the event loop: a daemon thread wakes every
``lease_ms / 3`` and renews all tracked leases in one pipeline of ``extend.lua`` calls (server clock, so
worker clocks never matter). With nothing in flight it issues no command at all. On a Redis Cluster the
renewals go one script call each (redis-py's cluster pipeline refuses scripts), on a blocking cluster client
that the thread makes at its first round with leases to renew (it discovers the cluster when made).

When Redis answers ``Lease.REVOKED`` (the sweep reaped the lease: the worker stalled, or was partitioned,
past its deadline), the keeper sets that job's ``revoked`` event, logs ``lease.revoked`` and stops
renewing it; the worker then cancels an async handler. A thread handler may still be running: it should
check ``job.revoked`` before side effects, and its finish will be refused as stale. A failed round (Redis
unreachable) is logged and retried at the next tick: a lease survives as long as one renewal per lease
lands.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import redis
import redis.cluster
from redis.crc import key_slot

from echomq import finish
from echomq._clients import blocking_twin
from echomq.errors import EchoMQError
from echomq.scripts import SyncScripts
from echomq.states import Lease
from echomq.worker import faults
from echomq.worker.logs import emit

if TYPE_CHECKING:
    from echomq.jobs import Claim
    from echomq.partitions import AnyBus
    from echomq.worker.handler import Job

log = logging.getLogger("echomq.lease_keeper")

LeaseKey = tuple[str, int]  # (job id, attempts token): one claim


class LeaseKeeper:
    """Extends the leases of the claims it tracks until they are untracked or revoked."""

    def __init__(self, bus: AnyBus, lease_ms: int, on_revoked: Callable[[Claim], None] | None = None) -> None:
        self.bus = bus
        self.on_revoked = on_revoked  # called in the keeper's thread
        self.lease_ms = lease_ms
        self.interval_s = lease_ms / 3 / 1000
        self._lock = threading.Lock()
        self._tracked: dict[LeaseKey, Job] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: redis.Redis | redis.cluster.RedisCluster | None = None
        self._scripts: SyncScripts | None = None
        self._started = False

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._started = True
        if not self.bus.is_cluster:  # no I/O yet: a single-node client connects on first use
            self._connect()
        self._thread = threading.Thread(target=self._run, name="echomq-lease-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, wait for its current round, and close its client."""
        self._stop.set()
        self._started = False
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._thread = None
        if self._client is not None:
            self._client.close()
            self._client = None
            self._scripts = None

    def track(self, jobs: Iterable[Job]) -> None:
        """Renew each job's lease from the next tick on; set its ``revoked`` if Redis refuses it."""
        with self._lock:
            for job in jobs:
                claim = job.claim
                self._tracked[(claim.job, claim.token)] = job

    def untrack(self, claim: Claim) -> bool:
        """Stop renewing ``claim``; True if it was still tracked (not revoked)."""
        with self._lock:
            return self._tracked.pop((claim.job, claim.token), None) is not None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.extend_all()

    def extend_all(self) -> None:
        """One round: renew every tracked lease, in one pipeline on a single node and one call each on a
        cluster (no command when none is tracked)."""
        with self._lock:
            batch = [job.claim for job in self._tracked.values()]
        if not batch or not self._started:
            return
        try:
            replies = self._send(
                [finish.extend_call(self.bus.route(claim.lane), claim, self.lease_ms) for claim in batch]
            )
            faults.at("worker.mid_extend")  # Redis renewed the leases; the replies are not read yet
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            emit(log, logging.WARNING, "lease.error", error=str(exc) or type(exc).__name__, jobs=len(batch))
            return
        for claim, reply in zip(batch, replies, strict=True):
            if isinstance(reply, Exception):
                emit(log, logging.WARNING, "lease.error", job=claim.job, error=str(reply))
                continue
            try:
                outcome = finish.lease_outcome(claim, reply)
            except EchoMQError:  # no row any more: the job is gone, which revokes the lease too
                outcome = Lease.REVOKED
            if outcome is Lease.FINISHED:
                # A handler that finishes the job itself (its own fenced script, returning the Finish)
                # completes it while it is still tracked: no revocation, just nothing left to renew.
                self.untrack(claim)
            elif outcome is Lease.REVOKED:
                self._revoke(claim)

    def _connect(self) -> SyncScripts:
        """The scripts on the keeper's client, made on first need."""
        if self._scripts is None:
            # A round must not hang past the lease it is renewing, but gets at least a second.
            self._client = blocking_twin(self.bus.redis, socket_timeout=max(1.0, self.interval_s))
            self._scripts = SyncScripts(self._client)
        return self._scripts

    def _send(self, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """One reply per extend call, a refused call's error in its place; raises if Redis is unreachable.

        A cluster gets one script call each, since redis-py's cluster pipeline refuses scripts: a refusal
        stays that call's reply, as in the pipeline, and so does a call that cannot reach its node: the
        leases of the other slots (a partitioned bus's other partitions, on other masters) are still
        renewed, and the rest of that slot's calls are not sent this round (each would wait out the
        socket timeout in turn).
        """
        scripts = self._connect()
        if self.bus.is_cluster:
            replies: list[Any] = []
            down: dict[int, Exception] = {}  # slot -> the error that reaching it raised this round
            for keys, args in calls:
                slot = key_slot(keys[0].encode())
                if slot in down:
                    replies.append(down[slot])
                    continue
                try:
                    replies.append(scripts.run("extend", keys, args))
                except redis.ResponseError as exc:
                    replies.append(exc)
                except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
                    down[slot] = exc
                    replies.append(exc)
            return replies
        assert self._client is not None
        with self._client.pipeline(transaction=False) as pipe:
            for keys, args in calls:
                scripts.run("extend", keys, args, client=pipe)
            return pipe.execute(raise_on_error=False)

    def _revoke(self, claim: Claim) -> None:
        with self._lock:
            job = self._tracked.pop((claim.job, claim.token), None)
        if job is None:
            return  # finished or released meanwhile: not a revocation
        job.revoked.set()
        emit(log, logging.WARNING, "lease.revoked", job=claim.job, lane=claim.lane, attempt=claim.token)
        if self.on_revoked is not None:
            self.on_revoked(claim)

"""The blocking producer's bus: admission, inspection and stats on a blocking redis-py client.

Most producers are not asyncio programs: a Django or Flask view, a management command, a cron script.
:class:`SyncBus` gives them the producer's half of :class:`echomq.Bus` on a blocking ``redis.Redis`` (or
``redis.cluster.RedisCluster``), with nothing copied: the same keyspace (a job enqueued here is the job
an asyncio worker of the same tag claims), the same checks and typed errors (one call builder,
:func:`echomq.jobs.enqueue_call`), the same scripts and the same reading of their replies.

Guarantees, as for :class:`echomq.Bus`:

* **Idempotent admission.** :meth:`SyncBus.enqueue` is one script keyed by the branded JOB id: the same
  id with the same lane and payload is ``Admission.DUPLICATE`` and changes nothing; with another lane or
  payload ``Admission.CONFLICT``, and nothing changes either.
* **Lost replies.** An admission can run and its reply never arrive (a timeout, a cut connection). Send
  it again with the same id: the retry answers ``DUPLICATE``, never a second job. Treat ``DUPLICATE`` as
  success. :meth:`SyncBus.enqueue_many` is one round trip of independent admissions (not a transaction):
  its retry answers ``DUPLICATE`` for those that ran and admits the rest.
* **Bad input changes nothing.** Every job of a call is checked before anything is sent; an ill-formed
  id, lane, payload or option raises its :class:`~echomq.errors.InvalidInput` error.
* **Threads.** One :class:`SyncBus` may be shared by the threads of a process (a WSGI server's): each call
  takes a connection of the client's pool for its round trip, and redis-py's blocking pool is
  thread-safe. Size the pool (``max_connections``) for the threads that call at once.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis
import redis.cluster

from echomq import control, dead, durable, flow, inspection, jobs, results, stats
from echomq._clients import client_options
from echomq._validate import check_int
from echomq._wire import SyncWire, plain_sync
from echomq.core import DEFAULT_TAG, Settings
from echomq.dead import DeadDeletion
from echomq.errors import InvalidOption, translate_redis_errors
from echomq.flow import FlowSettings, Rate
from echomq.inspection import JobInfo
from echomq.jobs import NewJob
from echomq.keyspace import Keyspace
from echomq.scripts import SyncScripts
from echomq.states import Admission, Control, Deletion
from echomq.stats import Stats

SyncClient = redis.Redis | redis.cluster.RedisCluster


class SyncBus:
    """A producer's bus on the blocking client ``redis`` under the tag ``tag`` (keys ``emq:{tag}:...``).

    ``redis`` is a ``redis.Redis`` or a ``redis.cluster.RedisCluster`` created with
    ``decode_responses=False`` (the default). Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, redis: SyncClient, tag: str = DEFAULT_TAG, settings: Settings | None = None) -> None:
        if not isinstance(redis, SyncClient):
            raise InvalidOption(
                f"a SyncBus needs a blocking redis.Redis or RedisCluster, got {type(redis).__name__}"
            )
        self.redis = redis
        self.keys = Keyspace(tag)
        self.settings = settings or Settings()
        self.scripts = SyncScripts(redis, wire=SyncWire(redis) if plain_sync(redis) else None)

    @classmethod
    def from_url(
        cls,
        url: str,
        tag: str = DEFAULT_TAG,
        settings: Settings | None = None,
        *,
        cluster: bool = False,
        max_connections: int | None = None,
    ) -> SyncBus:
        """A bus on a new blocking client for ``url`` (``redis://``, ``rediss://`` or ``unix://``); with
        ``cluster=True`` a cluster client that discovers the other nodes from that one (it connects now).

        ``max_connections`` sizes the client's pool: at least the number of threads that call at once."""
        options = client_options(max_connections)
        if cluster:
            with translate_redis_errors():
                return cls(redis.cluster.RedisCluster.from_url(url, **options), tag, settings)
        return cls(redis.Redis.from_url(url, **options), tag, settings)

    @property
    def tag(self) -> str:
        return self.keys.tag

    def enqueue(
        self,
        job: str,
        *,
        lane: str,
        payload: bytes,
        max_attempts: int = 5,
        priority: int = 0,
        delay_ms: int = 0,
    ) -> Admission:
        """Admit ``job`` on ``lane`` once: ``ADMITTED``, ``DUPLICATE`` or ``CONFLICT`` (see the module doc).

        Lost reply: the job is admitted; the retry (same id, lane and payload) answers ``DUPLICATE``."""
        keys, args = jobs.enqueue_call(self, NewJob(job, lane, payload, max_attempts, priority, delay_ms))
        if self.settings.wait_replicas:  # durable admission (echomq.durable)
            return jobs.admissions(durable.run_blocking(self, "enqueue", [(keys, args)]))[0]
        with translate_redis_errors():
            return jobs.admission(self.scripts.run("enqueue", keys, args))

    def enqueue_many(self, new_jobs: Iterable[NewJob]) -> list[Admission]:
        """Admit many jobs in one round trip (one call each on a cluster), each its own idempotent
        admission; every job is checked before anything is sent."""
        calls = [jobs.enqueue_call(self, spec) for spec in new_jobs]
        if not calls:
            return []
        if self.settings.wait_replicas:  # durable admission (echomq.durable)
            return jobs.admissions(durable.run_blocking(self, "enqueue", calls))
        with translate_redis_errors():
            return jobs.admissions(self.scripts.run_many("enqueue", calls))

    def inspect(self, job: str) -> JobInfo:
        """A job's row and location; raises :class:`~echomq.errors.UnknownJob` if there is no row."""
        job_key = self.keys.job(job)
        with translate_redis_errors():
            raw: dict[bytes, bytes] = self.redis.hgetall(job_key)  # type: ignore[assignment]
            info = inspection.row_info(self, job, raw)
            if info is not None:
                return info
            key, field = self.keys.tombstone(job)
            pipe = self.redis.pipeline(transaction=False)
            pipe.hget(key, field)
            pipe.time()
            value, now = pipe.execute()
        return inspection.tombstone_info(self, job, value, now)

    def result(self, job: str, *, timeout: float) -> bytes:
        """Wait up to ``timeout`` s for ``job``'s result, without polling (:mod:`echomq.results`)."""
        return results.result_blocking(self, job, timeout=timeout)

    def cancel(self, job: str, reason: str = "") -> Control:
        """Cancel a queued or delayed job (:mod:`echomq.control`)."""
        keys, args = control.end_call("cancel", self.keys, self.settings, job, reason)
        with translate_redis_errors():
            return control.outcome("cancel", self.scripts.run("cancel", keys, args), job)

    def revoke(self, job: str, reason: str = "") -> Control:
        """Take an active job from its worker (:mod:`echomq.control`)."""
        keys, args = control.end_call("revoke", self.keys, self.settings, job, reason)
        with translate_redis_errors():
            return control.outcome("revoke", self.scripts.run("revoke", keys, args), job)

    def delete_dead(self, job: str) -> Deletion:
        """Delete a dead letter, leaving its tombstone for the dedup window (:func:`echomq.dead.delete_dead`):
        ``DELETED``, ``ALREADY`` (a retried call after its reply was lost answers this) or ``REFUSED``."""
        keys, args = dead.delete_dead_call(self.keys, self.settings, job)
        with translate_redis_errors():
            return dead.deletion(self.scripts.run("delete_dead", keys, args), job)

    def delete_all_dead(self, *, batch: int = dead.DEFAULT_BATCH) -> DeadDeletion:
        """Delete every job of a snapshot of the dead set (:func:`echomq.dead.delete_all_dead`)."""
        check_int("batch", batch, 1, 10_000)
        with translate_redis_errors():
            snapshot = dead.oldest_first(self.redis.zscan_iter(self.keys.dead, count=1000))
            deleted: list[str] = []
            for start in range(0, len(snapshot), batch):
                chunk = snapshot[start : start + batch]
                calls = [dead.delete_dead_call(self.keys, self.settings, job) for job in chunk]
                deleted.extend(dead.deletions(chunk, self.scripts.run_many("delete_dead", calls)))
        return DeadDeletion(listed=len(snapshot), deleted=tuple(deleted))

    def dead_jobs(self, limit: int = 100) -> list[tuple[str, int]]:
        """The oldest ``limit`` dead-lettered ids with their time (server ms)."""
        check_int("limit", limit, 1, 100_000)
        with translate_redis_errors():
            rows: list[tuple[bytes, float]] = self.redis.zrange(  # type: ignore[assignment]
                self.keys.dead, 0, limit - 1, withscores=True
            )
        return [(job.decode(), int(score)) for job, score in rows]

    def _flow(self, call: tuple[list[str], list[object]]) -> None:
        with translate_redis_errors():
            flow.checked_reply(self.scripts.run("flow", *call))

    def pause(self, lane: str | None = None) -> None:
        """Pause the bus, or one lane (:mod:`echomq.flow`)."""
        self._flow(flow.pause_call(self.keys, self.settings.wake_cap, lane, resume=False))

    def resume(self, lane: str | None = None) -> None:
        """Resume the bus, or one lane (:mod:`echomq.flow`)."""
        self._flow(flow.pause_call(self.keys, self.settings.wake_cap, lane, resume=True))

    def set_lane_cap(self, lane: str, cap: int | None) -> None:
        """At most ``cap`` active jobs of ``lane`` (``"*"``: every lane; None clears) (:mod:`echomq.flow`)."""
        self._flow(flow.cap_call(self.keys, self.settings.wake_cap, lane, cap))

    def set_rate_limit(self, rate: Rate | None, *, lane: str | None = None) -> None:
        """A rate limit of the bus, a lane or every lane (``"*"``); None clears it (:mod:`echomq.flow`)."""
        self._flow(flow.rate_call(self.keys, self.settings.wake_cap, lane, rate))

    def flow_settings(self) -> FlowSettings:
        """The pauses, caps and rates set on this bus."""
        with translate_redis_errors():
            raw: dict[bytes, bytes] = self.redis.hgetall(self.keys.flow)  # type: ignore[assignment]
        return flow.settings_from(raw)

    def stats(self, *, lanes: int = 50) -> Stats:
        """Counters, depths and the first ``lanes`` lanes of the ring (read only)."""
        keys, args = stats.stats_call(self.keys, lanes)
        with translate_redis_errors():
            return stats.stats_from_reply(self.scripts.run("stats", keys, args))

    def close(self) -> None:
        """Close the client and its connections."""
        self.redis.close()

    def __enter__(self) -> SyncBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

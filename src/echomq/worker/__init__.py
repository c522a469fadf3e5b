"""The worker: claims jobs for its free slots, runs a handler on each, and finishes them, fenced.

Runtime shape: :mod:`echomq.worker.runner` is the worker's life (slots, start, graceful shutdown,
signals); :mod:`echomq.worker.fetcher` decides when to claim, block on the wake list and sweep
(:mod:`echomq.worker.pickup` is its blocking connection, the claim pipelined behind the BLPOP);
:mod:`echomq.worker.processor` runs one job (handler, timeout, complete or fail), a thread handler on a
pool of :mod:`echomq.worker.threads`; :mod:`echomq.worker.handler` is what a handler receives and
returns; :mod:`echomq.worker.completions` batches the completes; :mod:`echomq.worker.lease_keeper`
renews leases from its own thread; :mod:`echomq.worker.logs` writes its events and
:mod:`echomq.worker.faults` holds the fault points it crosses (unarmed unless ``ECHOMQ_FAULTS`` is set);
:mod:`echomq.worker.eviction` warns at start when Redis may evict keys.
The scripts behind :mod:`echomq.lanes`, :mod:`echomq.jobs`, :mod:`echomq.finish` and :mod:`echomq.sweep`
do every state change atomically.

Guarantees
==========
* **At least once.** A claimed job is in ``active`` under a lease until it is finished; if this worker
  dies, stalls or loses Redis, the sweep returns the job to its lane after the lease and another claim
  runs it. No job is dropped by a worker failure.
* **A handler can run twice** (or more) for one job, in exactly these cases:

  1. the worker dies (crash, SIGKILL, OOM, host loss) after the handler's effect and before its
     ``complete`` lands; the next claimant runs the job again;
  2. the lease is reaped while the handler still runs: the whole process stalled past ``lease_ms``
     (the lease keeper thread starved too: a stopped process, a partition from Redis, a clock jump on
     the server), the sweep returned the job, and another run started; the first run goes on until it
     looks at ``job.revoked``;
  3. a thread handler exceeded ``job_timeout_s``: the job is failed (and so retried) while the thread,
     which cannot be killed, may still be running;
  4. a finishing call could not reach Redis after its retries: the job is redelivered after the lease;
  5. graceful shutdown released a job whose handler had done its effect but not returned in time.

  Make the effect idempotent on ``job.id``; or return Redis effects as an :class:`~echomq.effects.Effects`
  (or a :class:`~echomq.effects.Completion`), which apply with the completion in one fenced step, so
  exactly once per job; or do the effect and the completion in a fenced script of your own and return its
  :class:`~echomq.states.Finish`. For another store, use ``job.attempt`` as a fencing token (the
  fencing recipe of the documentation).
* **Never finished twice.** Every finish carries the claim's attempts token, and Redis refuses a stale
  one (``job.stale`` in the logs): of two runs, at most one completes the job.
* **revoked** (``job.revoked``, a ``threading.Event``) is set when this run no longer owns the job: the
  lease keeper found the lease reaped (``lease.revoked``), the job timed out, or shutdown released it.
  On a reaped lease an async handler is also cancelled (``CancelledError`` at its next ``await``); a
  thread handler cannot be, so it should check ``job.revoked`` before each side effect, which narrows
  case 2 to the time between two checks. Its finish is refused as stale either way.
* **Leases** are renewed every ``lease_ms / 3`` by the keeper thread, also while a handler blocks the
  event loop; a lease is lost only when no renewal lands for a whole ``lease_ms``.
* **Graceful shutdown** (``stop()``, SIGTERM or SIGINT): claiming stops; in-flight jobs get ``grace_s``
  to finish; the rest are released at once (back to their lanes, the try not counted), so a restarted
  worker picks them up without waiting for their leases. A second signal releases at once. Cancelling
  the task of :meth:`~echomq.worker.runner.Worker.run` is a ``stop()``; cancelling it again releases at once.
* **Lost replies.** A call can run in Redis and its reply be lost (a timeout, a cut connection, a Redis
  pause longer than the socket timeout). Retries come from two places: redis-py's ``Retry`` when the
  bus's client has one (a ``Redis(host=...)`` client retries 10 times; ``from_url`` clients and the
  worker's own connections do not, see :mod:`echomq._clients`), and the worker's loops: the fetcher
  retries a claim with the same request id after the loop's pause (``_BACKOFF_S`` of
  :mod:`echomq.worker.runner`), the processor retries a finish (``complete``, ``fail``; ``release`` at
  shutdown) 3 times, the lease keeper renews at its next round. Every retry is harmless and answered
  truthfully: a retried claim gets the jobs the lost one claimed (no try spent, none stranded for a
  lease), a retried finish is told what the first one did. A worker that stops while a claim has no
  answer asks once more and releases its jobs.
* **Redis Cluster.** A bus on a ``redis.asyncio.RedisCluster`` client works the same way, with the same
  guarantees: every key of the bus is in one slot, so every script runs on the node that owns it. What
  differs is throughput, not outcome: the completes of one event-loop turn and the lease renewals of one
  round go one script call each (concurrently for the completes) instead of one pipeline, since redis-py's
  cluster pipeline refuses scripts.

Idle command budget
===================
An idle worker (nothing in flight, nothing queued, delayed or left to trim) sends, per
:data:`~echomq.worker.fetcher.IDLE_CAP_S` (600 s), one BLPOP on the wake list with its claim pipelined
behind it, and one sweep: 1 + 9 + 7 = 17 commands counting those the scripts run inside themselves (an
empty claim runs eight, a sweep with nothing due six), 1.7 a minute, within
:data:`~echomq.worker.runner.IDLE_COMMANDS_PER_MIN` (2). It sweeps sooner only when a reply said a step
is due (a delayed job, a lease deadline, a trim), see :mod:`echomq.worker.fetcher` for what that keeps:
a dead worker's jobs reclaimed at their deadline, delayed jobs on time, retention while idle. The lease
keeper sends nothing when nothing is in flight, and there are no heartbeat keys.
"""

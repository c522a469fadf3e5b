"""The fault-injection conformance suite: no guess lost, none scored twice, under every crash we can cause.

``codemojex conformance`` (``make faults`` for the long schedule) runs :mod:`.harness`: many players
submit guesses (with deliberate duplicates and idempotent retries) against real worker processes and a
real Redis while a fault schedule kills workers at random and at every boundary of their job cycle,
stalls them past their leases, crashes Redis onto its AOF, cuts the network between workers and Redis,
sweeps from several processes at once, and pauses Redis past its clients'
socket timeout; on a cluster of its own it reshards the game's slot and fails its master over (with
durable admission). At the end :mod:`.invariants` checks Redis against the run's
:mod:`.history`, and :mod:`.report` prints the figures (text and JSON). It can run against a Redis of
your own (``--redis-url``; it then leaves Redis crashes out and uses its own key tag).
"""

# The fault kinds a schedule may name (see codemojex.conformance.faults for what each does).
KINDS = ("kill", "boundary", "stall", "redis", "cut", "sweeps", "skew", "pause", "failover")

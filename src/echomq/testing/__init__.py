"""Tools for the tests, the benchmark and the conformance suite, never imported by the library or the
worker: real redis-server processes and clusters (:mod:`echomq.testing.server`), a TCP proxy that cuts
connections (:mod:`echomq.testing.proxy`), the queue's structural invariants
(:mod:`echomq.testing.invariants`) and a slot migration driver (:mod:`echomq.testing.reshard`)."""

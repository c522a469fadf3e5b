"""Tools for the tests, the benchmark and the conformance suite, never imported by the library or the
worker: real redis-server processes (:mod:`echomq.testing.server`) and clusters
(:mod:`echomq.testing.cluster`), a recorder of the commands a server receives (:mod:`echomq.testing.monitor`),
a TCP proxy that cuts connections (:mod:`echomq.testing.proxy`), the queue's structural invariants
(:mod:`echomq.testing.invariants`) and a slot migration driver (:mod:`echomq.testing.reshard`)."""

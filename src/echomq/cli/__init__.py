"""EchoMQ's command line (:mod:`echomq.cli.commands`, the ``echomq`` console script and ``python -m
echomq.cli``) and its demo (:mod:`echomq.cli.demo`, which starts a redis-server through
:mod:`echomq.testing`)."""

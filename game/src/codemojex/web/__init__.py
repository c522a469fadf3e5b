"""The web host: the HTTP API (FastAPI), live events, metrics and the three pages.

:func:`create_app` builds the app on a :class:`HostConfig`; :mod:`codemojex.serve` runs it with an
embedded Redis and a score worker process. The host validates, charges and admits (through
:func:`codemojex.guesses.submit`); it never scores and never reads a secret of an open round.

Modules by role, each importing only those before it: ``problems`` (the JSON error shape and the status
of every error and refusal), ``limits`` (the body-size limit), ``buckets`` (rate limits: token buckets
in Redis), ``admission`` (the admission middleware and every ``Limits``), ``idempotency`` (the
``Idempotency-Key`` header), ``views`` (JSON of the game's values), ``hub`` (the events hub: one reader
for every watched round, stream caps),
``throughput`` (the dashboard's samples), ``host`` (the configuration and the running state), ``auth``
(player and operator tokens), ``player_api``, ``operator_api``, ``proof_api``, ``events`` (server-sent
events), ``metrics`` (Prometheus text), and ``app`` on top (assembly, lifespan, pages).
"""

from __future__ import annotations

from codemojex.web.app import create_app
from codemojex.web.host import HostConfig

__all__ = ["HostConfig", "create_app"]

"""The web host: the HTTP API (FastAPI), live events, metrics and the three pages.

:func:`create_app` builds the app on a :class:`HostConfig`; :mod:`codemojex.serve` runs it with an
embedded Redis and a score worker process. The host validates, charges and admits (through
:func:`codemojex.guesses.submit`); it never scores and never reads a secret of an open round.

Modules by role: ``app`` (assembly, lifespan, pages), ``problems`` (the JSON error shape and the status
of every error and refusal), ``auth`` (player and operator tokens), ``limits`` (the body-size limit),
``idempotency`` (the ``Idempotency-Key`` header), ``views`` (JSON of the game's values), ``player_api``,
``operator_api``, ``proof_api``, ``events`` (server-sent events), ``metrics`` (Prometheus text) and
``throughput`` (the dashboard's samples).
"""

from __future__ import annotations

from codemojex.web.app import HostConfig, create_app

__all__ = ["HostConfig", "create_app"]

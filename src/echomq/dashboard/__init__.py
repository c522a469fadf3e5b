"""The queue-only web dashboard (``echomq dashboard``; ``pip install 'echomq[dashboard]'``): depth per
state, lanes with their fairness lag, active leases, dead letters with retry and delete, throughput.

:mod:`~.view` reads what the page shows (no web framework), :mod:`~.app` is the Starlette app (routes,
forms, the token and origin checks), :mod:`~.headers` its security headers, :mod:`~.serve` runs it with
uvicorn; the page is ``templates/`` and ``static/`` (no CDN, no inline script). Importing
:mod:`~.app` or :mod:`~.serve` needs the extra; :mod:`~.view` does not.
"""

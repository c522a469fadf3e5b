"""The server the ``echomq`` command talks to: ``--redis-url`` (:func:`use`), else ``REDIS_URL``, else
:data:`DEFAULT_URL`, and the URL as error messages show it (without its password)."""

from __future__ import annotations

import os
import urllib.parse

DEFAULT_URL = "redis://127.0.0.1:6379/0"


_given: list[str] = []  # --redis-url of this invocation (set once by the command line)


def use(url: str | None) -> None:
    """Make ``url`` (``--redis-url``) the server of this invocation; None leaves ``REDIS_URL`` in charge."""
    _given[:] = [url] if url else []


def given_url() -> str | None:
    """``--redis-url``, else ``REDIS_URL``, else None (the demo then starts an embedded server)."""
    return _given[0] if _given else os.environ.get("REDIS_URL") or None


def redis_url() -> str:
    return given_url() or DEFAULT_URL


def shown_url(url: str) -> str:
    """``url`` without its password, for error messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))

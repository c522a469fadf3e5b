"""The server the ``echomq`` command talks to: ``REDIS_URL``, else :data:`DEFAULT_URL`, and the URL as error
messages show it (without its password)."""

from __future__ import annotations

import os
import urllib.parse

DEFAULT_URL = "redis://127.0.0.1:6379/0"


def redis_url() -> str:
    return os.environ.get("REDIS_URL") or DEFAULT_URL


def shown_url(url: str) -> str:
    """``url`` without its password, for error messages."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))

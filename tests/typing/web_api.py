"""Only type-checked (``mypy --strict tests/typing``), never run: deploying the host as the README says
(any ASGI server runs ``create_app``), and serve's options."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from codemojex import players
from codemojex.game import GameSettings
from codemojex.serve import ServeOptions, serve
from codemojex.web import HostConfig, create_app


def deployed() -> FastAPI:
    config = HostConfig(
        redis_url="redis://127.0.0.1:6379/0",
        tag="cm",
        operator_token="from-a-secret-store",
        proof=False,
        settings=GameSettings(max_queued=20),
    )
    return create_app(config)


async def served_locally() -> int:
    token: str = players.new_token()
    assert players.token_digest(token) != token
    return await serve(ServeOptions(port=0, data_dir=Path(".codemojex-data"), proof=True))

"""The web host alone, for the benchmark's HTTP phase: ``python -m bench.host URL TAG PORT`` serves
:func:`codemojex.web.create_app` with uvicorn (no worker, no proof), with the bench's game settings."""

from __future__ import annotations

import sys

import uvicorn

from codemojex.game import GameSettings
from codemojex.web import HostConfig, create_app


def main() -> None:
    url, tag, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config = HostConfig(redis_url=url, tag=tag, settings=GameSettings(max_queued=1_000_000))
    uvicorn.run(create_app(config), host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()

"""Serving the dashboard: uvicorn in the running event loop, on ``host:port``, until SIGINT or SIGTERM
(uvicorn's own handlers), with the Host names it accepts: the address served, localhost and the ones
given (:mod:`echomq.dashboard.app`)."""

from __future__ import annotations

from collections.abc import Sequence

import uvicorn

from echomq._validate import check_int
from echomq.dashboard.app import create_app
from echomq.partitions import AnyBus

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def allowed(host: str, extra: Sequence[str]) -> list[str]:
    """The Host names accepted when serving on ``host``: it (unless a wildcard address), the loopback
    names and ``extra``."""
    served = [] if host in ("0.0.0.0", "::", "") else [f"[{host}]" if ":" in host else host]  # noqa: S104
    return list(dict.fromkeys([*served, *LOOPBACK, *extra]))


def server(
    bus: AnyBus,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    read_only: bool = False,
    allowed_hosts: Sequence[str] = (),
    refresh_s: float = 2.0,
) -> uvicorn.Server:
    """A uvicorn server of the dashboard of ``bus`` (not started: ``await server.serve()``)."""
    check_int("port", port, 0, 65_535)
    app = create_app(
        bus, read_only=read_only, allowed_hosts=allowed(host, allowed_hosts), refresh_s=refresh_s
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", proxy_headers=False)
    return uvicorn.Server(config)


async def serve(
    bus: AnyBus,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    read_only: bool = False,
    allowed_hosts: Sequence[str] = (),
    refresh_s: float = 2.0,
) -> None:
    """Serve the dashboard of ``bus`` until SIGINT or SIGTERM (the options of :func:`server`); prints the
    URL it serves first."""
    the_server = server(
        bus, host=host, port=port, read_only=read_only, allowed_hosts=allowed_hosts, refresh_s=refresh_s
    )
    config = the_server.config
    print(f"dashboard of bus {bus.tag} on http://{config.host}:{config.port}/", flush=True)  # noqa: T201
    await the_server.serve()

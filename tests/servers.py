"""Multi-server topologies started by the tests: a Redis Cluster, a Sentinel set.

Loopback only, on ports under 55535 (a cluster node also listens on its port +
10000 for the cluster bus). Built from :class:`EmbeddedRedis`, so the server is
whichever one the session uses (PATH, ``$COGWORKER_REDIS_SERVER`` or a wheel's);
the cluster is formed with CLUSTER ADDSLOTS and CLUSTER MEET, no redis-cli needed.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import redis as sync_redis
from redis.crc import key_slot

from cogworker_async.embedded import EmbeddedRedis, EmbeddedRedisError
from cogworker_async.redis_server import find_redis_server
from tests.helpers import wait_for_sync

HOST = "127.0.0.1"
SLOTS = 16384


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port(bus: bool = False) -> int:
    """A free port under 55535 (and its +10000 bus port free too, for a cluster node)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 45000 if bus else 55000)
        if _free(port) and (not bus or _free(port + 10000)):
            return port
    raise RuntimeError("no free port pair found")


def start_on_free_port(extra_args: Sequence[str], *, bus: bool = False) -> EmbeddedRedis:
    for _ in range(5):
        server = EmbeddedRedis(port=free_port(bus), extra_args=extra_args)
        try:
            server.start()
        except EmbeddedRedisError as error:
            if "Address already in use" in str(error):
                continue
            raise
        return server
    raise RuntimeError("could not start a server on a free port")


def one_node_cluster(tag: str = "cw") -> EmbeddedRedis:
    """A cluster node serving only the slot of ``{tag}``: a plain client works on
    keys of that slot, and any other key is refused, also one a script builds."""
    node = start_on_free_port(
        [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-require-full-coverage",
            "no",
        ],
        bus=True,
    )
    with sync_redis.Redis(host=HOST, port=node.port, decode_responses=True) as client:
        client.execute_command("CLUSTER ADDSLOTS", key_slot(tag.encode()))
        wait_for_sync(lambda: client.execute_command("CLUSTER INFO")["cluster_state"] == "ok")
    return node


class Cluster:
    """``primaries`` cluster nodes, the slots split evenly, ready (``cluster_state:ok``)."""

    def __init__(self, primaries: int = 3) -> None:
        self.nodes: list[EmbeddedRedis] = []
        try:
            args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            for _ in range(primaries):
                self.nodes.append(start_on_free_port(args, bus=True))
            self._form()
        except BaseException:
            self.stop()
            raise

    def client(self, index: int) -> sync_redis.Redis:
        port = self.nodes[index].port
        return sync_redis.Redis(host=HOST, port=port, decode_responses=True)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{HOST}:{n.port}" for n in self.nodes)

    def _form(self) -> None:
        share = SLOTS // len(self.nodes)
        for index in range(len(self.nodes)):
            first = index * share
            last = SLOTS - 1 if index == len(self.nodes) - 1 else first + share - 1
            with self.client(index) as client:
                client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))
        with self.client(0) as first_node:
            for node in self.nodes[1:]:
                first_node.execute_command("CLUSTER MEET", HOST, node.port)

        def ready() -> bool:
            for index in range(len(self.nodes)):
                with self.client(index) as client:
                    info = client.execute_command("CLUSTER INFO")
                    if info.get("cluster_state") != "ok" or int(
                        info.get("cluster_known_nodes", 0)
                    ) != len(self.nodes):
                        return False
            return True

        wait_for_sync(ready, timeout=30)

    def owner(self, slot: int) -> int:
        """The index of the node serving ``slot``."""
        with self.client(0) as client:
            for first, last, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                if int(first) <= slot <= int(last):
                    port = int(primary[1])
                    return next(i for i, n in enumerate(self.nodes) if n.port == port)
        raise LookupError(slot)

    def node_id(self, index: int) -> str:
        with self.client(index) as client:
            return str(client.execute_command("CLUSTER MYID"))

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def wait_until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    assert callable(condition)
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {timeout} s")
        time.sleep(0.05)


class Sentinels:
    """A primary, one replica and three sentinels watching them as ``service``.

    The sentinels are ``redis-server CONF --sentinel`` (no separate binary
    needed), each with its own writable config file (sentinel rewrites it).
    """

    def __init__(self, service: str = "cw", down_after_ms: int = 1000) -> None:
        self.service = service
        self.primary = start_on_free_port([])
        self.replica = start_on_free_port(["--replicaof", HOST, str(self.primary.port)])
        self.sentinels: list[subprocess.Popen[bytes]] = []
        self.ports: list[int] = []
        self._dir = Path(tempfile.mkdtemp(prefix="cogworker-sentinels-"))
        try:
            wait_for_sync(self._replica_in_sync, timeout=30)
            binary = find_redis_server()
            for index in range(3):
                port = free_port()
                conf = self._dir / f"sentinel-{index}.conf"
                conf.write_text(
                    f"port {port}\n"
                    f"bind {HOST}\n"
                    f"dir {self._dir}\n"
                    f"sentinel monitor {service} {HOST} {self.primary.port} 2\n"
                    f"sentinel down-after-milliseconds {service} {down_after_ms}\n"
                    f"sentinel failover-timeout {service} 10000\n"
                    f"sentinel parallel-syncs {service} 1\n"
                )
                with (self._dir / f"sentinel-{index}.log").open("wb") as log:
                    self.sentinels.append(
                        subprocess.Popen(
                            [binary, str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
                        )
                    )
                self.ports.append(port)
            wait_for_sync(self._sentinels_agree, timeout=30)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        nodes = ",".join(f"{HOST}:{port}" for port in self.ports)
        return f"redis+sentinel://{nodes}/{self.service}"

    def _replica_in_sync(self) -> bool:
        with sync_redis.Redis(host=HOST, port=self.replica.port) as client:
            return client.info("replication").get("master_link_status") == "up"

    def _sentinels_agree(self) -> bool:
        for port in self.ports:
            try:
                with sync_redis.Redis(host=HOST, port=port, decode_responses=True) as client:
                    state = client.execute_command("SENTINEL", "MASTER", self.service)
            except sync_redis.ConnectionError:
                return False
            fields = (
                dict(zip(state[::2], state[1::2], strict=False))
                if isinstance(state, list)
                else state
            )
            if (
                int(fields.get("num-other-sentinels", 0)) < 2
                or int(fields.get("num-slaves", 0)) < 1
            ):
                return False
        return True

    def primary_port(self) -> int:
        with sync_redis.Redis(host=HOST, port=self.ports[0], decode_responses=True) as client:
            _host, port = client.execute_command(
                "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service
            )
        return int(port)

    def logs(self, lines: int = 40) -> str:
        """The tail of each sentinel's log (for a failing test's report)."""
        parts = []
        for index in range(len(self.sentinels)):
            path = self._dir / f"sentinel-{index}.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"-- sentinel {index}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    def stop(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.replica.stop()
        self.primary.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

"""What a ``redis_url`` names: one server, a Redis Cluster, or a Sentinel-watched primary.

``redis://`` / ``rediss://`` / ``unix://`` are one server (redis-py parses them).
``redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]`` names a cluster
by some of its nodes (the client discovers the rest);
``redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]``
names the sentinels that watch the primary called SERVICE. The ``rediss+``
forms use TLS. Pure parsing: nothing here connects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
_NODE = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>\d+))?$")
DEFAULT_PORTS = {"cluster": 6379, "sentinel": 26379}


@dataclass(frozen=True, slots=True)
class Topology:
    """A multi-node URL, parsed: its kind, its nodes, and what they share."""

    kind: Literal["cluster", "sentinel"]
    nodes: tuple[tuple[str, int], ...]
    tls: bool = False
    username: str | None = None
    password: str | None = None
    service: str | None = None  # sentinel: the watched primary's name
    db: int = 0


def scheme_of(url: str) -> str:
    return url.partition("://")[0].lower()


def is_multi_node(url: str) -> bool:
    return scheme_of(url) in CLUSTER_SCHEMES + SENTINEL_SCHEMES


def parse_topology(url: str) -> Topology:
    """Parse a ``redis+cluster://`` or ``redis+sentinel://`` URL; ValueError says what is wrong.

    The message never holds the password (the caller adds the masked URL).
    """
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme not in CLUSTER_SCHEMES + SENTINEL_SCHEMES:
        raise ValueError(f"{scheme}:// is not a cluster or sentinel URL")
    kind: Literal["cluster", "sentinel"] = "cluster" if scheme in CLUSTER_SCHEMES else "sentinel"
    rest = rest.partition("?")[0].partition("#")[0]
    location, _, path = rest.partition("/")
    userinfo, at, hosts = location.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if colon else None
    nodes: list[tuple[str, int]] = []
    for piece in hosts.split(","):
        match = _NODE.match(piece.strip())
        if match is None:
            raise ValueError(f"bad node {piece.strip()!r}: write HOST:PORT[,HOST:PORT...]")
        port = int(match["port"]) if match["port"] else DEFAULT_PORTS[kind]
        if not 0 < port < 65536:
            raise ValueError("the port must be an integer from 1 to 65535")
        nodes.append((match["host"].strip("[]"), port))
    parts = [p for p in path.split("/") if p]
    service: str | None = None
    db = 0
    if kind == "cluster":
        if parts and parts != ["0"]:
            raise ValueError("a cluster has database 0 only: drop the /DB")
    else:
        if not parts or len(parts) > 2:
            raise ValueError("name the primary: redis+sentinel://HOST:PORT[,...]/SERVICE[/DB]")
        service = unquote(parts[0])
        if len(parts) == 2:
            if not (parts[1].isascii() and parts[1].isdigit()):
                raise ValueError(f"the DB index {parts[1]!r} must be an integer >= 0")
            db = int(parts[1])
    return Topology(
        kind=kind,
        nodes=tuple(nodes),
        tls=scheme.startswith("rediss"),
        username=username,
        password=password,
        service=service,
        db=db,
    )


def hash_tag(namespace: str) -> str | None:
    """The namespace's cluster hash tag (``{cw}`` → ``cw``), or None when untagged.

    Redis hashes only what is between the first ``{`` and the next ``}`` when
    that is not empty: with a tag, every key of the namespace lives in one slot.
    """
    start = namespace.find("{")
    if start < 0:
        return None
    end = namespace.find("}", start + 1)
    if end <= start + 1:
        return None
    return namespace[start + 1 : end]

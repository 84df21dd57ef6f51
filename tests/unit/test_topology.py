"""Cluster and Sentinel URLs parsed; a namespace's hash tag."""

from __future__ import annotations

import pytest

from cogworker_async.store.topology import hash_tag, is_multi_node, parse_topology


def test_cluster_url_nodes_and_credentials() -> None:
    parsed = parse_topology("rediss+cluster://me:s%40cret@a:7000,b,[::1]:7002")
    assert parsed.kind == "cluster"
    assert parsed.nodes == (("a", 7000), ("b", 6379), ("::1", 7002))
    assert (parsed.username, parsed.password, parsed.tls) == ("me", "s@cret", True)


def test_sentinel_url_service_and_db() -> None:
    parsed = parse_topology("redis+sentinel://:pw@s1,s2:26380/main/3")
    assert parsed.kind == "sentinel"
    assert parsed.nodes == (("s1", 26379), ("s2", 26380))
    assert (parsed.service, parsed.db, parsed.password, parsed.username) == ("main", 3, "pw", None)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://a:7000,:1", "bad node"),
        ("redis+cluster://a:70000", "from 1 to 65535"),
        ("redis+cluster://a/1", "database 0 only"),
        ("redis+sentinel://a", "name the primary"),
        ("redis+sentinel://a/m/x", "DB index 'x'"),
        ("redis://a", "not a cluster or sentinel URL"),
    ],
)
def test_bad_urls(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_topology(url)


def test_multi_node_schemes() -> None:
    assert is_multi_node("redis+cluster://a")
    assert is_multi_node("REDISS+SENTINEL://a/m")
    assert not is_multi_node("redis://a")
    assert not is_multi_node("unix:///s")


@pytest.mark.parametrize(
    ("namespace", "tag"),
    [("{cw}", "cw"), ("app{cw}x", "cw"), ("{}cw", None), ("cw", None), ("{cw", None)],
)
def test_hash_tag(namespace: str, tag: str | None) -> None:
    assert hash_tag(namespace) == tag

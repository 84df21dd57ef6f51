"""Where ``topology`` used to live: its names, re-exported.

The parsing is a leaf (``cogworker_async.topology``) so that ``Settings`` can
check a URL without importing the store.
"""

from cogworker_async.topology import (
    CLUSTER_SCHEMES,
    DEFAULT_PORTS,
    SENTINEL_SCHEMES,
    Topology,
    hash_tag,
    is_multi_node,
    parse_topology,
    scheme_of,
)

__all__ = [
    "CLUSTER_SCHEMES",
    "DEFAULT_PORTS",
    "SENTINEL_SCHEMES",
    "Topology",
    "hash_tag",
    "is_multi_node",
    "parse_topology",
    "scheme_of",
]

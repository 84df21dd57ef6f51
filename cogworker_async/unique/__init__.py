"""Unique jobs: one job per key at a time, the lock taken with the push and released
owner-checked on every terminal path (see ``lock.py``, ``releases.py``)."""

from cogworker_async.unique.lock import (
    DEFAULT_UNIQUE_FOR,
    UNIQUE_MODES,
    Release,
    UniqueKey,
    UniqueMode,
    check_unique,
    digest,
    lock_key,
    release_of,
    unique_field,
)
from cogworker_async.unique.releases import DeferredReleases

__all__ = [
    "DEFAULT_UNIQUE_FOR",
    "UNIQUE_MODES",
    "DeferredReleases",
    "Release",
    "UniqueKey",
    "UniqueMode",
    "check_unique",
    "digest",
    "lock_key",
    "release_of",
    "unique_field",
]

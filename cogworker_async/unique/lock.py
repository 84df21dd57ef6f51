"""Unique-job locks: which key a job locks, and what its payload carries.

Invariant: a lock exists only beside its job. ``enqueue_unique.lua`` takes the
lock (value: the jid, TTL ``unique_for``) and writes the job in one step, so
there is never a lock without a job nor two jobs under one lock. The payload's
``unique`` field (``{"key", "mode", "for"}``) is all a worker, recovery or an
operator's delete needs to release it, owner-checked, on a terminal path.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from cogworker_async.holds import is_held_key
from cogworker_async.keys import Keys
from cogworker_async.timing import check_duration

UniqueMode = Literal["until_executed", "until_executing"]
UNIQUE_MODES: tuple[str, ...] = ("until_executed", "until_executing")
# A lock outlives a lost job by at most this much when the job gives no
# unique_for: every lock has a TTL, so none can stick forever.
DEFAULT_UNIQUE_FOR = 3600.0
UniqueKey = Callable[..., Any]
"""``unique_key(*args, **kwargs)``: the value (JSON-able, or its ``str``) a lock is keyed by."""


def check_unique(
    unique: str | None, unique_for: float | None, unique_key: UniqueKey | None
) -> None:
    """Refuse a mode we don't know, a TTL that is no time, or options without a mode."""
    if unique is not None and unique not in UNIQUE_MODES:
        raise ValueError(f"unique must be one of {', '.join(UNIQUE_MODES)}, got {unique!r}")
    if unique_for is not None:
        check_duration(unique_for, "unique_for")
    if unique_key is not None and not callable(unique_key):
        raise TypeError(f"unique_key must be a callable, got {unique_key!r}")


def digest(
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    queue: str,
    unique_key: UniqueKey | None = None,
) -> str:
    """The lock's digest: over (name, args, kwargs, queue), or the user function's value."""
    if unique_key is not None:
        value: Any = unique_key(*args, **kwargs)
        material = orjson.dumps([name, value], default=str, option=orjson.OPT_SORT_KEYS)
    else:
        material = orjson.dumps(
            [name, list(args), dict(kwargs), queue], default=str, option=orjson.OPT_SORT_KEYS
        )
    return hashlib.sha1(material, usedforsecurity=False).hexdigest()


def lock_key(keys: Keys, name: str, hexdigest: str) -> str:
    """``<ns>:unique:<name>:<digest>``: the name makes ``locks list`` readable."""
    return keys.unique(f"{name}:{hexdigest}")


def lock_prefix(keys: Keys) -> str:
    """``<ns>:unique:``: every lock key starts with it."""
    return keys.unique("")


def is_lock_key(key: str, prefix: str) -> bool:
    """Whether ``key`` may be a lock under ``prefix`` (``lock_prefix(keys)``): a payload
    names its lock key, and a payload is data (a dead entry retried, a job from
    another producer, a middleware's edit), so no path writes a key it names
    unless it is a lock of this namespace. Not the handed-over releases list
    (``~releases``: no lock's name starts with ``~``). The rule of every kind
    of hold (``holds.is_held_key``, ``includes/holds.lua``)."""
    return is_held_key(key, prefix)


def check_lock_key(keys: Keys, field: Any) -> None:
    """Refuse to enqueue a job whose ``unique`` field (a middleware may edit it) names
    a key that is not a lock of this namespace: ``ValueError`` naming it."""
    key = field.get("key") if isinstance(field, dict) else None
    if not isinstance(key, str) or not is_lock_key(key, lock_prefix(keys)):
        raise ValueError(
            f"unique.key must be a lock key under {lock_prefix(keys)!r} "
            f"(as unique_field builds it), got {key!r}"
        )


def releases_key(keys: Keys) -> str:
    """Where a stopping worker hands over releases it could not make (a list of
    ``{"key", "jid"}``); the next worker's deferred-release duty drains it.
    Not a lock: two colons short of one, and a list."""
    return keys.unique("~releases")


def unique_field(
    keys: Keys,
    *,
    name: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    queue: str,
    mode: str,
    unique_for: float | None,
    unique_key: UniqueKey | None,
) -> dict[str, Any]:
    """The payload's ``unique`` field for one job."""
    ttl = DEFAULT_UNIQUE_FOR if unique_for is None else float(unique_for)
    key = lock_key(keys, name, digest(name, args, kwargs, queue, unique_key))
    return {"key": key, "mode": mode, "for": ttl}


@dataclass(frozen=True, slots=True)
class Release:
    """A lock to release: its key, and the jid that must still hold it."""

    key: str
    jid: str


def foreign_lock(job: Mapping[str, Any], prefix: str) -> str | None:
    """The key a job's ``unique`` field names when it is not a lock under ``prefix``
    (never locked, renewed or released: for the error line), else None."""
    field = job.get("unique")
    key = field.get("key") if isinstance(field, dict) else None
    if isinstance(key, str) and not is_lock_key(key, prefix):
        return key
    return None


def unique_for_of(job: Mapping[str, Any]) -> float:
    """The lock's TTL (s) a job's payload names (``unique.for``); the default for a
    payload that names none or no usable one."""
    field = job.get("unique")
    ttl = field.get("for") if isinstance(field, dict) else None
    if (
        isinstance(ttl, int | float)
        and not isinstance(ttl, bool)
        and math.isfinite(ttl)
        and ttl > 0
    ):
        return float(ttl)
    return DEFAULT_UNIQUE_FOR


def release_of(job: Mapping[str, Any], *, terminal: bool, prefix: str) -> Release | None:
    """The lock a job releases on this path, if any.

    ``terminal``: the job is done for good (success, dead, discard, burial);
    an ``until_executing`` job released its lock when its run started, so
    only ``until_executed`` releases here. Not terminal: the run's start.
    ``prefix``: ``lock_prefix(keys)``; a key the payload names outside it is no
    lock of ours (``foreign_lock`` names it): None.
    """
    field = job.get("unique")
    if not isinstance(field, dict):
        return None
    key, jid = field.get("key"), job.get("jid")
    if not isinstance(key, str) or not isinstance(jid, str) or not is_lock_key(key, prefix):
        return None
    mode = field.get("mode", "until_executed")
    if terminal != (mode != "until_executing"):
        return None
    return Release(key, jid)

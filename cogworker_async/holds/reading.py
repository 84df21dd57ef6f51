"""The holds a decoded job's payload names (as ``includes/holds.lua`` reads them
from the raw payload)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cogworker_async.holds.kinds import (
    _KINDS,
    NOT_BATCH_FIELDS,
    NOT_SLOT_FIELDS,
    Hold,
    HoldKind,
    Path,
    is_held_key,
    prefix_of,
)
from cogworker_async.keys import Keys


def _at(job: Mapping[str, Any], path: Path) -> Any:
    value: Any = job
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _same(value: Any, expected: Any) -> bool:
    # JSON's true is not 1 (as in Lua): bools compare only with bools.
    return type(value) is type(expected) and value == expected


def _seconds(value: Any) -> float | None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if number and math.isfinite(value) and value > 0 else None


def hold_in(
    job: Mapping[str, Any], kind: HoldKind, keys: Keys, *, started: bool = True
) -> Hold | None:
    """The (first) hold of ``kind`` a decoded job names, or None (see ``holds_in``)."""
    return next(iter(holds_in(job, kind, keys, started=started)), None)


def holds_in(
    job: Mapping[str, Any], kind: HoldKind, keys: Keys, *, started: bool = True
) -> list[Hold]:
    """The holds of ``kind`` a decoded job names (as ``includes/holds.lua``
    reads them from the raw payload): one at most, or (``many``) one per name
    of its list. ``started``: the job's run began (see ``InPayload.unless_started``)."""
    spec = kind.payload
    if spec is None or spec.key[0] not in job:
        return []
    owner = job.get("jid")
    if not isinstance(owner, str) or not owner:
        return []
    if (
        len(spec.key) == 1
        and spec.when is None
        and spec.unless_started is None
        and spec.ttl is None
        and not spec.many
    ):
        # The plain shape (a batch membership: one top-level field, no
        # condition, no TTL): read without the general walk below.
        name = job[spec.key[0]]
        if not isinstance(name, str) or not name:
            return []
        prefix = prefix_of(kind, keys)
        if spec.named:  # prefix + a non-empty name: held unless it names a "~" key
            return [] if name[0] == "~" or not prefix else [Hold(kind.name, prefix + name, owner)]
        return [Hold(kind.name, name, owner)] if is_held_key(name, prefix) else []
    if spec.when is not None and not _same(_at(job, spec.when[0]), spec.when[1]):
        return []
    gave_back = spec.unless_started
    if started and gave_back is not None and _same(_at(job, gave_back[0]), gave_back[1]):
        return []
    found = _at(job, spec.key)
    names = (found if isinstance(found, list) else []) if spec.many else [found]
    prefix = prefix_of(kind, keys)
    ttl = None if spec.ttl is None else _seconds(_at(job, spec.ttl))
    held = []
    for key in names:
        if not isinstance(key, str) or not key:
            continue
        full = prefix + key if spec.named else key
        if is_held_key(full, prefix):
            held.append(Hold(kind.name, full, owner, ttl))
    return held


def read(job: Mapping[str, Any], keys: Keys, *, started: bool = True) -> tuple[Hold, ...]:
    """Every hold a decoded job names in its payload, one per kind at most but
    for a ``many`` kind's (``started``: see ``hold_in``)."""
    found: list[Hold] = []
    for kind in _KINDS.values():
        # The field looked up first: a job that names none of the kinds (a
        # plain job) pays one dict lookup per kind, no call.
        spec = kind.payload
        if spec is not None and spec.key[0] in job:
            found.extend(holds_in(job, kind, keys, started=started))
    return tuple(found)


def batch_member(job: Mapping[str, Any]) -> str | None:
    """The batch (its bid, as the payload names it) whose membership is all a
    decoded job holds, when ``read`` would find just that one hold and
    ``encode_calls`` would put it in its batch's group; else None (no
    membership, another hold beside it, a name or jid ``read`` or
    ``encode_calls`` treats otherwise: the caller reads the job's holds).

    A batch member's ack takes this instead of a ``Hold``: building one, and
    then regrouping it, were most of what a member costs the worker over a
    plain job (``store/commands/acks.py``, ``Ack.member``)."""
    bid = job.get("batch")
    if type(bid) is not str or not bid or bid[0] == "~":
        return None
    owner = job.get("jid")
    if type(owner) is not str or not owner or "," in owner:
        return None
    for field in NOT_BATCH_FIELDS:  # a handful of dict lookups
        if field in job:
            return None
    return bid


def slots_only(job: Mapping[str, Any]) -> list[str] | None:
    """The concurrency limits' names (as the payload's ``limit_slots`` lists
    them) whose slots are all a decoded job holds, when ``read`` would find
    just those holds and ``encode_calls`` would put each in its key's group;
    else None (no slots, another hold beside them, a name or jid ``read`` or
    ``encode_calls`` treats otherwise: the caller reads the job's holds).

    A limited job's ack takes these names instead of ``Hold``s, as a batch
    member's takes its bid (``batch_member``; ``Ack.slots``)."""
    names = job.get("limit_slots")
    if type(names) is not list or not names:
        return None
    owner = job.get("jid")
    if type(owner) is not str or not owner or "," in owner:
        return None
    for field in NOT_SLOT_FIELDS:  # a handful of dict lookups
        if field in job:
            return None
    for name in names:  # a named key: prefix + a name that is no "~" key
        if type(name) is not str or not name or name[0] == "~":
            return None
    return names

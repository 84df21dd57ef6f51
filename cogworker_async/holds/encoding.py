"""What the worker's side sends the scripts of a job's holds: a hold block
(``encode``, ``block``), the releases it hands over (``released``), and the
declared kinds as the table a payload-reading script takes (``kinds_table``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from cogworker_async.holds.kinds import _KINDS, HOLD_FIELDS, Event, Hold, Rule, kind_of, prefix_of
from cogworker_async.keys import Keys


def released(holds: Iterable[Hold], event: Event) -> list[Hold]:
    """The lock holds ``event`` releases (what a caller hands over when it cannot
    settle the job in a script step). A counted hold (a batch membership) is
    never handed over as a lock: the step that drops or files the job later
    (``requeue.lua``'s ``d:`` marks, ``file_unsettled.lua``) counts it from
    the payload."""
    return [
        hold
        for hold in holds
        if kind_of(hold).rule(event) is Rule.RELEASE and kind_of(hold).outcomes is None
    ]


def encode(
    keys: Keys, holds: Iterable[Hold], event: Event, *, wait: float = 0.0, position: int = 1
) -> list[str | int]:
    """The hold groups of one job for ``includes/holds.lua`` (without the count):
    (position, prefix, key, owner, ttl ms or "" to release) per hold the event
    releases or keeps; a hold it leaves is not sent. ``wait``: how long (s) the
    job waits before it runs again (a retry's delay), added to a kept TTL."""
    groups: list[str | int] = []
    for hold in holds:
        kind = kind_of(hold)
        rule = kind.rule(event)
        if rule is Rule.LEAVE:
            continue
        ttl: str | int = ""
        if kind.outcomes is not None:
            ttl = "@" + kind.outcomes[event]  # a counted release: how the member ended
        elif rule is Rule.KEEP:
            seconds = max(0.0, wait) + (kind.default_ttl if hold.ttl is None else hold.ttl)
            ttl = max(1, int(seconds * 1000))
        groups.extend((position, prefix_of(kind, keys), hold.key, hold.owner, ttl))
    return groups


def encode_calls(
    keys: Keys, jobs: Iterable[tuple[int, Iterable[Hold]]], event: Event
) -> list[str | int]:
    """The hold groups of a call's jobs (``(position, holds)`` each), as ``encode``
    but with the counted holds (batch memberships) of one key gathered in one
    group, and so the released member holds (a concurrency limit's slots) of
    one key: position ``"*p1,p2,..."``, owner ``"jid1,jid2,..."``, ttl
    ``"@<outcome>"`` (counted) or ``""`` (a slot: one ``SREM`` and one unpark a
    key; see ``includes/holds.lua``, ``settle_counted_group``). An ack of 150
    members of one batch sends one group, not 150 (5 arguments each). An owner
    with a comma (a foreign payload's jid) keeps a group of its own."""
    groups: list[str | int] = []
    counted: dict[tuple[str, str], tuple[list[str], list[str], str]] = {}
    for position, held in jobs:
        for hold in held:
            kind = _KINDS.get(hold.kind)
            if kind is None or kind.rules[event] is not Rule.RELEASE or "," in hold.owner:
                groups.extend(encode(keys, (hold,), event, position=position))
                continue
            outcomes = kind.outcomes
            if outcomes is not None:
                ttl = "@" + outcomes[event]
            elif kind.shape == "member":
                ttl = ""
            else:
                groups.extend(encode(keys, (hold,), event, position=position))
                continue
            found = counted.get((hold.key, ttl))
            if found is None:
                found = counted[(hold.key, ttl)] = ([], [], prefix_of(kind, keys))
            found[0].append(str(position))
            found[1].append(hold.owner)
    for (key, ttl), (positions, owners, prefix) in counted.items():
        groups.extend(("*" + ",".join(positions), prefix, key, ",".join(owners), ttl))
    return groups


def encode_members(keys: Keys, bids: Iterable[str], owners: Iterable[str]) -> list[str | int]:
    """The ack groups of a call's batch members read by ``batch_member`` (no
    ``Hold``): the call's ``i``-th job (position ``i``) is a member of the
    ``i``-th of ``bids`` ("" for none), owned by the ``i``-th of ``owners``.
    One group per batch, as ``encode_calls`` gathers a counted hold's
    (released, outcome "succeeded"). A call whose other acks carry a ``Hold``
    of the same batch sends that key a second group: each settles its own
    members, each member counted once (``batch_end.lua``'s ``SREM``)."""
    kind = _KINDS["batch"]  # the plain membership (``batch_member`` checked it)
    assert kind.outcomes is not None
    prefix = prefix_of(kind, keys)
    ttl = "@" + kind.outcomes[Event.ACK]
    found: dict[str, tuple[list[str], list[str]]] = {}
    last, positions, names = "", [], []
    for position, (bid, owner) in enumerate(zip(bids, owners, strict=True), 1):
        if not bid:
            continue
        if bid != last:  # a call's members are most often all of one batch
            group = found.get(bid)
            if group is None:
                group = found[bid] = ([], [])
            last, positions, names = bid, group[0], group[1]
        positions.append(str(position))
        names.append(owner)
    groups: list[str | int] = []
    for bid, (positions, names) in found.items():
        groups.extend(("*" + ",".join(positions), prefix, prefix + bid, ",".join(names), ttl))
    return groups


def encode_slots(
    keys: Keys, slots: Iterable[Sequence[str]], owners: Iterable[str]
) -> list[str | int]:
    """The ack groups of a call's limited jobs read by ``slots_only`` (no
    ``Hold``): the call's ``i``-th job (position ``i``) holds a slot of each of
    the ``i``-th of ``slots`` (names; empty for none), owned by the ``i``-th of
    ``owners``. One group per key, as ``encode_calls`` gathers a released
    member hold's: position ``"*p1,p2,..."``, owner ``"jid1,jid2,..."``, ttl
    ``""`` (one ``SREM`` and one unpark a key, ``includes/holds.lua``)."""
    prefix = prefix_of(_KINDS["limit_slot"], keys)
    found: dict[str, tuple[list[str], list[str]]] = {}
    for position, (names, owner) in enumerate(zip(slots, owners, strict=True), 1):
        for name in names:
            group = found.get(name)
            if group is None:
                group = found[name] = ([], [])
            group[0].append(str(position))
            group[1].append(owner)
    groups: list[str | int] = []
    for name, (positions, jids) in found.items():
        groups.extend(("*" + ",".join(positions), prefix, prefix + name, ",".join(jids), ""))
    return groups


def block(keys: Keys, holds: Iterable[Hold], event: Event, *, wait: float = 0.0) -> list[str | int]:
    """One job's whole hold block: the count, then its groups (``encode``)."""
    groups = encode(keys, holds, event, wait=wait)
    return [len(groups) // HOLD_FIELDS, *groups]


def kinds_table(keys: Keys) -> bytes:
    """The declared kinds as the JSON the payload-reading scripts take (one
    argument; see ``includes/holds.lua``, ``settle_payload_holds``)."""
    return orjson.dumps(kinds_spec(keys))


def kinds_spec(keys: Keys) -> list[dict[str, Any]]:
    """Per kind that a payload names: its prefix, default TTL (ms), where the
    payload names it, and its rule per event (``kinds_table`` before JSON);
    last, the after prefix (``{"after": ..., "rules": {}}``)."""
    table = []
    for kind in _KINDS.values():
        spec = kind.payload
        if spec is None:
            continue
        table.append(
            {
                "mark": f'"{spec.key[0]}"',
                "key": spec.key,
                "named": spec.named,
                "ttl": spec.ttl or False,
                "when": spec.when or False,
                "unless_started": spec.unless_started or False,
                "many": spec.many,
                "prefix": kind.prefix(keys),
                "default_ttl": max(1, int(kind.default_ttl * 1000)),
                "rules": {event.value: rule.value for event, rule in kind.rules.items()},
                "outcomes": {e.value: o for e, o in (kind.outcomes or {}).items()} or False,
            }
        )
    # Not a hold (no rules: nothing in the table's loop acts on it) but where
    # a payload-reading step finds the jobs waiting on the one it settles
    # (``.options(after=[...])``, ``includes/after_end.lua``): a plain job's
    # end there is a prerequisite's end, looked for only while jobs wait.
    table.append({"after": keys.after_prefix, "prefix": keys.after_prefix, "rules": {}})
    return table

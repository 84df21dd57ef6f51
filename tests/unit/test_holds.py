"""cogworker_async/holds/: the declarations, and what the worker's side makes of them
(the scripts' side: tests/lua/test_holds.py)."""

from __future__ import annotations

import orjson
import pytest

from cogworker_async import holds
from cogworker_async.holds import Event, Hold, Rule
from cogworker_async.keys import Keys
from cogworker_async.unique.lock import is_lock_key

KEYS = Keys("ns")


def test_every_declared_kind_rules_every_event() -> None:
    for kind in holds.KINDS.values():
        assert set(kind.rules) == set(Event)


def test_encode_releases_keeps_for_the_wait_plus_the_ttl_and_leaves_out_the_rest() -> None:
    unique = Hold(holds.UNIQUE.name, "ns:unique:t.job:1", "j1", 30.0)
    running = Hold(holds.PERIODIC_RUNNING.name, "ns:periodic:running:nightly", "j1")
    assert holds.encode(KEYS, [unique, running], Event.DEAD, position=3) == [
        3, "ns:unique:", "ns:unique:t.job:1", "j1", "",
        3, "ns:periodic:running:", "ns:periodic:running:nightly", "j1", "",
    ]  # fmt: skip
    kept = holds.encode(KEYS, [unique, running], Event.RETRY, wait=10.0)
    assert kept[4] == 40_000  # the wait + its own TTL
    assert kept[9] == 3_610_000  # the wait + the kind's default (it names none)
    # A requeue leaves the unique lock (the job still holds it), keeps the other.
    assert holds.encode(KEYS, [unique, running], Event.RECOVERY_REQUEUE) == [
        1, "ns:periodic:running:", "ns:periodic:running:nightly", "j1", 3_600_000,
    ]  # fmt: skip
    assert holds.block(KEYS, [unique], Event.SHUTDOWN_REQUEUE) == [0]
    assert holds.released([unique, running], Event.RETRY) == []
    assert holds.released([unique, running], Event.ACK) == [unique, running]


def test_read_finds_each_kind_by_its_declaration() -> None:
    job = {
        "jid": "j1",
        "unique": {"key": "ns:unique:t.job:1", "mode": "until_executed", "for": 30},
        "periodic_pjid": "nightly",
        "periodic_until_executed": True,
        "periodic_queued_ttl": 90,
    }
    assert holds.read(job, KEYS) == (
        Hold("unique", "ns:unique:t.job:1", "j1", 30.0),
        Hold("periodic_running", "ns:periodic:running:nightly", "j1", 90.0),
    )
    # Not a run of an overlap=False entry (the flag must be JSON true), no TTL of
    # its own: the kind's default applies later.
    assert holds.read({**job, "periodic_until_executed": 1, "unique": None}, KEYS) == ()
    odd_ttl = {"jid": "j1", "unique": {"key": "ns:unique:x", "for": float("inf")}}
    assert holds.read(odd_ttl, KEYS) == (Hold("unique", "ns:unique:x", "j1", None),)


@pytest.mark.parametrize(
    "field",
    [
        {"key": "ns:paused"},  # another key of the namespace
        {"key": "ns:unique:~releases"},  # the prefix's own bookkeeping
        {"key": "ns:unique:"},  # the bare prefix
        {"key": "other:unique:x"},  # another namespace
        {"key": 5},
    ],
)
def test_read_refuses_a_key_outside_its_prefix(field: dict[str, object]) -> None:
    assert holds.read({"jid": "j1", "unique": field}, KEYS) == ()


def test_an_until_executing_lock_is_held_only_before_the_start() -> None:
    job = {"jid": "j1", "unique": {"key": "ns:unique:x", "mode": "until_executing"}}
    assert holds.read(job, KEYS) == ()
    assert holds.read(job, KEYS, started=False) == (Hold("unique", "ns:unique:x", "j1", None),)


def test_the_prefix_rule_is_the_unique_locks_rule() -> None:
    prefix = "ns:unique:"
    for key in ("ns:unique:a", "ns:unique:~r", "ns:unique:", "ns:uniquex", "x"):
        assert holds.is_held_key(key, prefix) == is_lock_key(key, prefix)
    assert not holds.is_held_key("ns:unique:a", "")


def test_the_kinds_table_carries_prefixes_fields_and_rules() -> None:
    table = orjson.loads(holds.kinds_table(KEYS))
    by_prefix = {kind["prefix"]: kind for kind in table}
    unique = by_prefix["ns:unique:"]
    assert unique["mark"] == '"unique"'
    assert unique["key"] == ["unique", "key"]
    assert unique["rules"]["recovery_requeue"] == Rule.LEAVE.value
    running = by_prefix["ns:periodic:running:"]
    assert running["named"] is True
    assert running["when"] == [["periodic_until_executed"], True]
    assert running["default_ttl"] == 3_600_000


MEMBER = {"jid": "j1", "class": "t.job", "batch": "b1"}


@pytest.mark.parametrize(
    ("job", "bid"),
    [
        (MEMBER, "b1"),
        ({**MEMBER, "unique": {"key": "ns:unique:x"}}, None),  # a lock beside it
        ({**MEMBER, "periodic_pjid": "nightly"}, None),
        ({**MEMBER, "limit_slots": ["api"]}, None),
        ({**MEMBER, "unique": None}, None),  # the field alone: read decides
        ({**MEMBER, "jid": "j1,j2"}, None),  # a foreign jid: a group of its own
        ({**MEMBER, "batch": "~pending"}, None),  # bookkeeping: no hold
        ({**MEMBER, "batch": ""}, None),
        ({**MEMBER, "batch": 5}, None),
        ({"jid": "j1", "class": "t.job"}, None),
    ],
)
def test_batch_member_is_read_when_the_membership_is_all_a_job_holds(
    job: dict[str, object], bid: str | None
) -> None:
    """The ack's shortcut takes a bid exactly where ``read`` finds that one
    membership and nothing else (and ``encode_calls`` would group it)."""
    assert holds.batch_member(job) == bid
    if bid is not None:
        assert holds.read(job, KEYS) == (Hold("batch", KEYS.batch_prefix + bid, "j1"),)


def test_encode_members_sends_the_groups_encode_calls_sends() -> None:
    jobs = [
        {**MEMBER, "jid": "j1", "batch": "b1"},
        {"jid": "p1", "class": "t.job"},  # a plain job between
        {**MEMBER, "jid": "j2", "batch": "b2"},
        {**MEMBER, "jid": "j3", "batch": "b1"},
    ]
    by_hold = holds.encode_calls(
        KEYS, [(i, holds.read(job, KEYS)) for i, job in enumerate(jobs, 1)], Event.ACK
    )
    bids = [holds.batch_member(job) or "" for job in jobs]
    by_bid = holds.encode_members(KEYS, bids, [str(job["jid"]) for job in jobs])
    assert by_bid == by_hold == [
        "*1,4", "ns:batch:", "ns:batch:b1", "j1,j3", "@succeeded",
        "*3", "ns:batch:", "ns:batch:b2", "j2", "@succeeded",
    ]  # fmt: skip


def test_a_kind_declared_later_turns_the_shortcut_off_for_its_jobs() -> None:
    """A job naming a kind declared after import (a feature's, a test's) holds it
    too: read, not the shortcut, and the shortcut again once it is withdrawn."""
    extra = holds.HoldKind(
        "test_extra",
        prefix=lambda keys: f"{keys.ns}:extra:",
        default_ttl=60.0,
        rules=dict.fromkeys(Event, Rule.RELEASE),
        payload=holds.InPayload(key=("extra",), named=True),
    )
    job = {**MEMBER, "extra": "x"}
    holds.declare(extra)
    try:
        assert holds.batch_member(job) is None
        assert len(holds.read(job, KEYS)) == 2
    finally:
        holds.withdraw(extra.name)
    assert holds.batch_member(job) == "b1"


LIMITED = {"jid": "j1", "class": "t.job", "limit_slots": ["api", "acct:1"]}


@pytest.mark.parametrize(
    ("job", "names"),
    [
        (LIMITED, ["api", "acct:1"]),
        ({**LIMITED, "unique": {"key": "ns:unique:x"}}, None),  # a lock beside them
        ({**LIMITED, "periodic_pjid": "nightly"}, None),
        ({**LIMITED, "batch": "b1"}, None),
        ({**LIMITED, "jid": "j1,j2"}, None),  # a foreign jid: a group of its own
        ({**LIMITED, "limit_slots": ["~parked:x"]}, None),  # bookkeeping: no hold
        ({**LIMITED, "limit_slots": [""]}, None),
        ({**LIMITED, "limit_slots": [5]}, None),
        ({**LIMITED, "limit_slots": []}, None),
        ({**LIMITED, "limit_slots": "api"}, None),
        ({"jid": "j1", "class": "t.job"}, None),
    ],
)
def test_slots_only_is_read_when_the_slots_are_all_a_job_holds(
    job: dict[str, object], names: list[str] | None
) -> None:
    """The ack's shortcut takes the names exactly where ``read`` finds those
    slots and nothing else (and ``encode_calls`` would group them)."""
    assert holds.slots_only(job) == names
    if names is not None:
        assert holds.read(job, KEYS) == tuple(
            Hold("limit_slot", KEYS.limits_prefix + name, "j1") for name in names
        )


def test_encode_slots_sends_the_groups_encode_calls_sends() -> None:
    jobs = [
        {**LIMITED, "jid": "j1", "limit_slots": ["a"]},
        {"jid": "p1", "class": "t.job"},  # a plain job between
        {**LIMITED, "jid": "j2", "limit_slots": ["b", "a"]},
        {**LIMITED, "jid": "j3", "limit_slots": ["a"]},
    ]
    by_hold = holds.encode_calls(
        KEYS, [(i, holds.read(job, KEYS)) for i, job in enumerate(jobs, 1)], Event.ACK
    )
    names = [holds.slots_only(job) or [] for job in jobs]
    by_name = holds.encode_slots(KEYS, names, [str(job["jid"]) for job in jobs])
    assert by_name == by_hold == [
        "*1,3,4", "ns:limits:", "ns:limits:a", "j1,j2,j3", "",
        "*3", "ns:limits:", "ns:limits:b", "j2", "",
    ]  # fmt: skip


def test_a_kind_declared_later_turns_the_slots_shortcut_off_for_its_jobs() -> None:
    extra = holds.HoldKind(
        "test_extra",
        prefix=lambda keys: f"{keys.ns}:extra:",
        default_ttl=60.0,
        rules=dict.fromkeys(Event, Rule.RELEASE),
        payload=holds.InPayload(key=("extra",), named=True),
    )
    job = {**LIMITED, "extra": "x"}
    holds.declare(extra)
    try:
        assert holds.slots_only(job) is None
    finally:
        holds.withdraw(extra.name)
    assert holds.slots_only(job) == ["api", "acct:1"]

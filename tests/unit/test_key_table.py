"""The key guard's table names every key keys.py builds, with its type (or why none)."""

from __future__ import annotations

import inspect

import pytest

from cogworker_async.keys import Keys
from cogworker_async.worker.key_table import NOT_GUARDED, TYPED, expected_type_of

NS = "ns"


def _members() -> set[str]:
    return {
        name
        for name, member in inspect.getmembers(Keys)
        if not name.startswith("_") and (isinstance(member, property) or inspect.isfunction(member))
    }


def test_every_member_of_keys_has_a_type_or_a_reason() -> None:
    """A key added to keys.py without a line in key_table fails here, not in production."""
    assert _members() == TYPED.keys() | NOT_GUARDED.keys()
    assert not TYPED.keys() & NOT_GUARDED.keys()


@pytest.mark.parametrize("member", sorted(TYPED))
def test_each_family_is_classified_by_its_type(member: str) -> None:
    keys = Keys(NS)
    built = getattr(keys, member)
    key = built("sample") if callable(built) else built
    assert expected_type_of(keys, key) == TYPED[member], key


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("ns:unique:~releases", "list"),  # a list among the unique locks
        ("ns:unique:app.job:abc", "string"),
        ("ns:periodic:entries", "hash"),
        ("ns:periodic:last", "hash"),
        ("ns:periodic:results", "hash"),
        ("ns:periodic:paused", "set"),  # not a slot claim
        ("ns:periodic:claim:tick:abc:123", "string"),
        ("ns:periodic:running:tick", "string"),
        ("ns:queues", "set"),  # not a queue named "s"
        ("ns:queue:s", "list"),
        ("ns:schedule:wakeup", "zset"),
        ("ns:stats:processed", "integer"),
        ("ns:stats:processed:2026-12-05", "integer"),
        ("ns:stats:aborted", "integer"),
        ("ns:result:abc", "list"),
        ("ns:result_gone:abc", "string"),
        ("ns:status:abc", "hash"),
        ("ns:process:host:1:x", None),  # rewritten by every beat
        ("ns:workers:host:1:x", None),
        ("ns:quarantine:ns:queue:q", None),
        ("ns:aborts", None),  # a channel
        ("other:queue:q", None),  # not this namespace
        ("ns:something_else", None),
    ],
)
def test_keys_sharing_a_prefix_are_told_apart(key: str, expected: str | None) -> None:
    assert expected_type_of(Keys(NS), key) == expected

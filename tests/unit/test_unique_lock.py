"""Unique-lock bookkeeping without Redis: options checked, digests, which path releases."""

from __future__ import annotations

import pytest

from cogworker_async import job
from cogworker_async.keys import Keys
from cogworker_async.unique import (
    DEFAULT_UNIQUE_FOR,
    Release,
    check_unique,
    digest,
    release_of,
    unique_field,
)
from cogworker_async.unique.lock import foreign_lock, is_lock_key, lock_prefix


def test_options_are_checked() -> None:
    check_unique("until_executed", 10, None)
    with pytest.raises(ValueError, match="unique must be one of"):
        check_unique("until_and_while", None, None)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="unique_for"):
            check_unique("until_executed", bad, None)
    with pytest.raises(TypeError):
        check_unique("until_executed", True, None)
    with pytest.raises(TypeError):
        check_unique("until_executed", None, "not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError):

        @job(name="u.bad", unique="sometimes")  # type: ignore[call-overload, untyped-decorator]
        async def bad() -> None: ...


def test_digest_covers_name_args_kwargs_queue() -> None:
    base = digest("a", (1,), {"x": 1}, "q")
    assert base == digest("a", [1], {"x": 1}, "q")
    assert (
        len(
            {
                base,
                digest("b", (1,), {"x": 1}, "q"),
                digest("a", (2,), {"x": 1}, "q"),
                digest("a", (1,), {"x": 2}, "q"),
                digest("a", (1,), {"x": 1}, "r"),
            }
        )
        == 5
    )
    assert digest("a", (1,), {"y": 2, "x": 1}, "q") == digest("a", (1,), {"x": 1, "y": 2}, "q")


def test_unique_key_decides_alone() -> None:
    def by_user(user: int, note: str = "") -> int:
        return user

    assert digest("a", (1,), {"note": "x"}, "q", by_user) == digest("a", (1,), {}, "r", by_user)
    assert digest("a", (1,), {}, "q", by_user) != digest("a", (2,), {}, "q", by_user)


def test_unique_field_and_release_of() -> None:
    keys = Keys("ns")
    prefix = lock_prefix(keys)
    field = unique_field(
        keys, name="j", args=(1,), kwargs={}, queue="q", mode="until_executed",
        unique_for=None, unique_key=None,
    )  # fmt: skip
    assert field["key"].startswith("ns:unique:j:")
    assert field["for"] == DEFAULT_UNIQUE_FOR
    executed = {"jid": "a" * 24, "unique": field}
    assert release_of(executed, terminal=True, prefix=prefix) == Release(field["key"], "a" * 24)
    assert release_of(executed, terminal=False, prefix=prefix) is None
    executing = {"jid": "a" * 24, "unique": {**field, "mode": "until_executing"}}
    assert release_of(executing, terminal=False, prefix=prefix) == Release(field["key"], "a" * 24)
    assert release_of(executing, terminal=True, prefix=prefix) is None
    assert release_of({"jid": "a"}, terminal=True, prefix=prefix) is None
    assert release_of({"jid": "a", "unique": "junk"}, terminal=True, prefix=prefix) is None
    assert release_of({"jid": 5, "unique": field}, terminal=True, prefix=prefix) is None


def test_lock_keys_are_only_under_the_prefix() -> None:
    keys = Keys("ns")
    prefix = lock_prefix(keys)
    assert is_lock_key("ns:unique:j:abc", prefix)
    for key in ("ns:paused", "ns:unique:", "ns:unique:~releases", "other:unique:j:abc", ""):
        assert not is_lock_key(key, prefix), key
    assert not is_lock_key("ns:unique:j:abc", "")  # no prefix given: nothing admitted
    outside = {"jid": "a" * 24, "unique": {"key": "ns:paused", "mode": "until_executed"}}
    assert release_of(outside, terminal=True, prefix=prefix) is None
    assert foreign_lock(outside, prefix) == "ns:paused"

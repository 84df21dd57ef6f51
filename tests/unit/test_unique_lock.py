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
    field = unique_field(
        keys, name="j", args=(1,), kwargs={}, queue="q", mode="until_executed",
        unique_for=None, unique_key=None,
    )  # fmt: skip
    assert field["key"].startswith("ns:unique:j:")
    assert field["for"] == DEFAULT_UNIQUE_FOR
    executed = {"jid": "a" * 24, "unique": field}
    assert release_of(executed, terminal=True) == Release(field["key"], "a" * 24)
    assert release_of(executed, terminal=False) is None
    executing = {"jid": "a" * 24, "unique": {**field, "mode": "until_executing"}}
    assert release_of(executing, terminal=False) == Release(field["key"], "a" * 24)
    assert release_of(executing, terminal=True) is None
    assert release_of({"jid": "a"}, terminal=True) is None
    assert release_of({"jid": "a", "unique": "junk"}, terminal=True) is None
    assert release_of({"jid": 5, "unique": field}, terminal=True) is None

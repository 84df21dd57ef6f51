"""FetchRenewals: a fetch's renewal stands for the run's start only when the start
comes soon after it, and only once; a lock another copy holds is named."""

from __future__ import annotations

import logging

import pytest

from cogworker_async.store.commands import Renewal
from cogworker_async.unique import renewals
from cogworker_async.unique.renewals import FetchRenewals


def test_a_fresh_renewal_stands_once_and_a_stale_one_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(renewals.time, "monotonic", lambda: now[0])
    noted = FetchRenewals("ns:unique:", logging.getLogger("test"))
    noted.note([Renewal(b"a", "a", "a"), Renewal(b"b", "b", "b"), Renewal(b"c", "c", "c")])
    assert noted.fresh(b"a", 30)
    assert not noted.fresh(b"a", 30)  # forgotten once asked
    now[0] += 0.9
    assert not noted.fresh(b"b", 10)  # 0.9 s is past 5% of 10 s
    assert noted.fresh(b"c", 3600)  # within the one-second cap
    assert not noted.fresh(b"never", 30)


def test_a_lock_held_by_another_copy_or_no_lock_is_named(caplog: pytest.LogCaptureFixture) -> None:
    noted = FetchRenewals("ns:unique:", logging.getLogger("test"))
    with caplog.at_level(logging.WARNING):
        noted.note([Renewal(b"x", "jid-x", "newer"), Renewal(b"y", "jid-y", None)])
    messages = [r.getMessage() for r in caplog.records]
    assert any("jid-x" in m and "newer" in m for m in messages)
    assert any("jid-y" in m and "not a string" in m for m in messages)

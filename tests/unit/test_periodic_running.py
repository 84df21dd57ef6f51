"""What a worker reads from a periodic job's payload: its running lock and TTLs, and
what the filing of its failure does with the lock (kept for a retry, released when
terminal)."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import pytest

from cogworker_async import holds
from cogworker_async import job as job_decorator
from cogworker_async.keys import Keys
from cogworker_async.periodic import every
from cogworker_async.periodic.running import active_ttl, queued_ttl, running_lock
from cogworker_async.settings import Settings
from cogworker_async.store.commands import Filing, filing_event
from cogworker_async.worker.settlement import Settler

KEYS = Keys("ns")


def job(**extra: Any) -> dict[str, Any]:
    return {"jid": "a" * 24, "class": "x", "args": [], "queue": "default", **extra}


def test_payload_fields_follow_the_spec() -> None:
    plain = every(60, "x", name="sync").payload_fields(120.0)
    assert plain == {"periodic_pjid": "sync", "periodic_slot": 120.0}
    locked = every(60, "x", name="sync", overlap=False, queued_ttl=30, active_ttl=90)
    assert locked.payload_fields(120.0) == {
        "periodic_pjid": "sync",
        "periodic_slot": 120.0,
        "periodic_until_executed": True,
        "periodic_queued_ttl": 30.0,
        "periodic_active_ttl": 90.0,
    }


def test_running_lock_only_for_until_executed_runs() -> None:
    assert running_lock(job(), KEYS) == ""
    assert running_lock(job(periodic_pjid="sync"), KEYS) == ""
    assert running_lock(job(periodic_pjid="sync", periodic_until_executed="yes"), KEYS) == ""
    locked = job(periodic_pjid="sync", periodic_until_executed=True)
    assert running_lock(locked, KEYS) == "ns:periodic:running:sync"
    # TTLs: the payload's, or an hour when missing or nonsense.
    assert (queued_ttl(locked), active_ttl(locked)) == (3600.0, 3600.0)
    odd = job(periodic_queued_ttl=True, periodic_active_ttl=-1)
    assert (queued_ttl(odd), active_ttl(odd)) == (3600.0, 3600.0)
    assert queued_ttl(job(periodic_queued_ttl=5)) == 5.0


def test_ttls_must_be_positive() -> None:
    with pytest.raises(ValueError, match="queued_ttl"):
        every(60, "x", overlap=False, queued_ttl=0)


@pytest.mark.parametrize(
    ("retry", "retry_count", "kept"), [(3, None, True), (3, 2, False), (False, None, False)]
)
def test_failure_filing_keeps_the_lock_for_a_retry_and_releases_it_when_terminal(
    retry: int | bool, retry_count: int | None, kept: bool
) -> None:
    settler = Settler(
        None,  # type: ignore[arg-type]  # building a filing touches no Redis
        KEYS,
        Settings(),
        identity="me",
        logger=logging.getLogger("test"),
        rng=random.Random(1),
    )
    failed = job(
        periodic_pjid="sync",
        periodic_until_executed=True,
        periodic_queued_ttl=100,
        retry=retry,
    )
    if retry_count is not None:
        failed["retry_count"] = retry_count  # this failure is the last of `retry`
    filing = settler.failure_filing(b"raw", failed, RuntimeError("boom"))
    assert _lock(filing) == "ns:periodic:running:sync"
    if kept:
        assert filing.target == KEYS.retry
        assert _lock_ttl(filing) is not None
        assert _lock_ttl(filing) >= 100  # type: ignore[operator]
    else:
        assert _lock_ttl(filing) is None
    plain = settler.failure_filing(b"raw", job(), RuntimeError("boom"))
    assert (_lock(plain), _lock_ttl(plain)) == ("", None)


def _lock(filing: Filing) -> str:
    """The key of the one hold a filing carries ("" for none)."""
    assert len(filing.holds) <= 1
    return filing.holds[0].key if filing.holds else ""


def _lock_ttl(filing: Filing) -> float | None:
    """How long (s) the filing keeps its hold (None: released, or no hold)."""
    groups = holds.encode(
        KEYS, filing.holds, filing_event(filing, KEYS), wait=filing.score - time.time()
    )
    return None if not groups or groups[4] == "" else int(groups[4]) / 1000


def test_options_of_a_bound_job_are_carried_and_hashed() -> None:

    @job_decorator(name="opts.x", queue="q1")
    async def x() -> None: ...

    plain = every(60, x, name="n")
    bound = every(60, x.options(retry=False, timeout=9), name="n")
    assert plain.options == {}
    assert "options" not in plain.definition()  # unchanged hash for entries without options
    assert bound.payload_fields(60.0)["retry"] is False
    assert bound.payload_fields(60.0)["timeout"] == 9
    assert bound.queue == "q1"
    assert bound.digest != plain.digest

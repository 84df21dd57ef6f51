"""Every duration option goes through one rule (``timing.check_duration``):
a finite number of seconds, at most ``MAX_DURATION``, refused with an error
naming the option. Issue 21 item 7: ``keep_result=1e20`` was accepted (and kept
with no expiry), ``unique_for=1e20`` reached Redis (a raw ``ResponseError``),
``delay=1e300`` parked a job for ever."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from cogworker_async import Settings, job, periodic
from cogworker_async.client.client import _due
from cogworker_async.jobs import JobOptions
from cogworker_async.keys import Keys
from cogworker_async.timing import MAX_DURATION
from cogworker_async.worker.settlement import Settler


@job(name="durations.noop")
async def noop() -> None:
    pass


HUGE = (1e20, 1e300, MAX_DURATION * 2)

OPTIONS: dict[str, Callable[[float], Any]] = {
    "keep_result": lambda v: noop.options(keep_result=v),
    "unique_for": lambda v: noop.options(unique="until_executed", unique_for=v),
    "delay": lambda v: noop.options(delay=v),
    "timeout": lambda v: noop.options(timeout=v),
    "@job keep_result": lambda v: job(name="durations.k", keep_result=v),
    "@job unique_for": lambda v: job(name="durations.u", unique="until_executed", unique_for=v),
    "@job timeout": lambda v: job(name="durations.t", timeout=v),
    "every": lambda v: periodic.every(v, noop),
    "grace": lambda v: periodic.every(60, noop, misfire="run_once", grace=v),
    "queued_ttl": lambda v: periodic.every(60, noop, queued_ttl=v),
}


@pytest.mark.parametrize("huge", HUGE)
@pytest.mark.parametrize("option", list(OPTIONS))
def test_a_duration_past_the_maximum_is_refused_naming_the_option(option: str, huge: float) -> None:
    with pytest.raises(ValueError, match=option.rsplit(maxsplit=1)[-1]) as refused:
        OPTIONS[option](huge)
    assert "at most" in str(refused.value)


@pytest.mark.parametrize("option", list(OPTIONS))
def test_the_maximum_itself_is_accepted(option: str) -> None:
    OPTIONS[option](MAX_DURATION)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
@pytest.mark.parametrize("option", ["keep_result", "unique_for", "timeout", "delay"])
def test_no_time_is_still_refused(option: str, bad: float) -> None:
    with pytest.raises(ValueError, match=option):
        OPTIONS[option](bad)


def test_options_built_directly_are_checked_at_enqueue() -> None:
    # The CLI builds JobOptions itself: the client checks them once per call.
    now = time.time()
    with pytest.raises(ValueError, match="delay"):
        _due(JobOptions(delay=1e300), now)
    with pytest.raises(ValueError, match="at"):
        _due(JobOptions(at=now + 2 * MAX_DURATION), now)
    assert _due(JobOptions(at=now + 60), now) == now + 60


@pytest.mark.parametrize("field", ["keep_result", "status_ttl", "job_timeout"])
def test_duration_settings_have_the_same_maximum(field: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=field):
        Settings(**{field: 1e20})  # type: ignore[arg-type]
    Settings(**{field: MAX_DURATION})  # type: ignore[arg-type]


@job(name="durations.far", retry=5, retry_in=lambda count, exc, payload: 1e20)
async def far() -> None:
    pass


def test_a_retry_in_answer_past_the_maximum_falls_back_to_the_default_backoff() -> None:
    keys = Keys("ns")
    settler = Settler(
        None,  # type: ignore[arg-type]  # building a filing touches no Redis
        keys,
        Settings(),
        identity="me",
        logger=logging.getLogger("test"),
        rng=random.Random(1),
    )
    payload = {"jid": "a" * 24, "class": "durations.far", "args": [], "queue": "default"}
    now = time.time()
    filing = settler.failure_filing(b"raw", payload, RuntimeError("x"), far)
    assert filing.target == keys.retry
    assert now + 15 <= filing.score <= now + 30  # Sidekiq's first backoff, not 1e20 s

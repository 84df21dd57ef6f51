"""Each option list is declared once (a TypedDict): the names every declaration takes,
the dataclass they make, and a clear error for a name none of them takes."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from cogworker_async import job, periodic
from cogworker_async.job_options import (
    EnqueueOptionArgs,
    JobOptionArgs,
    JobOptions,
    RunOptionArgs,
    carried_options,
)
from cogworker_async.periodic.entries import CronOptionArgs, cron, every


@job(name="options.noop", retry=3)
async def noop(x: int = 0) -> None:
    pass


def test_the_dataclass_has_the_fields_the_keyword_list_declares() -> None:
    assert {f.name for f in fields(JobOptions)} == set(EnqueueOptionArgs.__optional_keys__)
    assert RunOptionArgs.__optional_keys__ < JobOptionArgs.__optional_keys__


@pytest.mark.parametrize(
    "declare",
    [
        lambda: job(retyr=3),
        lambda: noop.options(dealy=5),
        lambda: every(10, noop, misfir="run_once"),
        lambda: cron("* * * * *", noop, zone="UTC"),
        lambda: periodic(10, unique="until_executed"),
    ],
)
def test_an_unknown_option_is_named_with_those_taken(declare: Any) -> None:
    with pytest.raises(TypeError, match=r"unknown option\(s\) \w+; it takes .*queue"):
        declare()


def test_none_keeps_the_jobs_own_and_delay_is_not_inherited() -> None:
    once = noop.options(queue=None, delay=5, timeout=None)
    assert once.options.queue == "default"
    assert once.options.retry == 3
    assert once.options.delay == 5
    again = once.function.options(at=1e9)
    assert again.options.delay is None
    assert again.options.at == 1e9


def test_the_options_are_checked_in_one_place_for_every_way_in() -> None:
    for declare in (lambda: job(timeout=-1), lambda: noop.options(timeout=-1)):
        with pytest.raises(ValueError, match="timeout"):
            declare()
    with pytest.raises(ValueError, match="queued_ttl"):
        every(10, noop, queued_ttl=-1)
    with pytest.raises(ValueError, match="queued_ttl"):
        periodic(10, queued_ttl=-1)(lambda: None)


def test_a_periodic_entry_carries_the_run_options_of_its_bound_job() -> None:
    bound = noop.options(timeout=5, backtrace=False, queue="q")
    assert carried_options(bound.options) == {"retry": 3, "timeout": 5, "backtrace": False}
    entry = cron("* * * * *", bound, tz="Europe/Berlin")
    assert (entry.queue, entry.tz, dict(entry.options)) == (
        "q",
        "Europe/Berlin",
        {
            "retry": 3,
            "timeout": 5,
            "backtrace": False,
        },
    )
    assert set(CronOptionArgs.__optional_keys__) >= {"tz", "queue", "misfire", "args"}

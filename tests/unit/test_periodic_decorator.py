"""``@periodic``: the job and its entry declared together, checked at import."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import cogworker_async
from cogworker_async import Settings, Worker, job, periodic
from cogworker_async.jobs import JobRegistry
from cogworker_async.periodic import Entry, cron, every
from cogworker_async.periodic.timing import next_slot


def test_the_decorator_makes_a_job_and_declares_its_entry() -> None:
    @periodic("*/5 * * * *", tz="Europe/Berlin", overlap=False, misfire="run_once", retry=2)
    async def sync() -> None: ...

    (entry,) = sync.schedules
    assert isinstance(entry, Entry)
    assert (
        entry.name
        == sync.name
        == f"{__name__}.test_the_decorator_makes_a_job_and_declares_its_entry.<locals>.sync"
    )
    assert (entry.expression, entry.tz, entry.overlap, entry.misfire) == (
        "*/5 * * * *",
        "Europe/Berlin",
        False,
        "run_once",
    )
    assert sync.defaults.retry == 2
    assert entry.job == sync.name


def test_a_number_is_every_seconds_and_names_and_args_are_the_entrys() -> None:
    @periodic(30, name="refresh", args=(1,), kwargs={"full": True}, job_name="cache.refresh")
    async def refresh(n: int, full: bool = False) -> None: ...

    (entry,) = refresh.schedules
    assert (entry.name, entry.job, entry.seconds, entry.args, dict(entry.kwargs)) == (
        "refresh",
        "cache.refresh",
        30.0,
        (1,),
        {"full": True},
    )


def test_stacked_on_a_job_it_uses_that_job_and_refuses_job_options_of_its_own() -> None:
    @periodic("0 * * * *")
    @job(name="hourly", queue="slow")
    async def hourly() -> None: ...

    assert hourly.name == "hourly"
    assert hourly.schedules[0].queue == "slow"

    @job(name="twice")
    async def twice() -> None: ...

    both = periodic("0 3 * * *", name="at3")(periodic("0 4 * * *", name="at4")(twice))
    assert [e.name for e in both.schedules] == ["at4", "at3"]
    with pytest.raises(TypeError, match="in @job, not here"):
        periodic("0 * * * *", retry=3)(twice)


@pytest.mark.parametrize(
    ("schedule", "options", "error"),
    [
        ("not cron", {}, ValueError),
        ("* * * * *", {"tz": "Mars/Olympus"}, Exception),
        (30, {"tz": "Europe/Berlin"}, ValueError),
        (0, {}, ValueError),
        (True, {}, TypeError),
        ("* * * * *", {"misfire": "later"}, ValueError),
    ],
)
def test_a_bad_declaration_fails_at_import(
    schedule: Any, options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):

        @periodic(schedule, **options)
        async def bad() -> None: ...


def test_the_six_field_form_has_a_seconds_field() -> None:
    entry = cron("*/2 * * * * *", "tick")
    start = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    first = next_slot(entry, start)
    assert first == start + 2
    assert next_slot(entry, first) == start + 4


def test_spec_names_resolve_to_one_object() -> None:
    assert cogworker_async.periodic is periodic
    assert periodic.entry is cron
    assert periodic.every is every
    assert periodic.Entry is Entry
    # The subpackage stays reachable through the object.
    import cogworker_async.periodic.ticker as ticker  # noqa: PLR0402 - this form is the test

    assert ticker.Ticker is not None
    assert cogworker_async.periodic.entries.Entry is Entry


def test_a_worker_gets_the_entries_of_its_jobs_once() -> None:
    @periodic(60, name="feed", job_name="feed.job")
    async def feed() -> None: ...

    assert JobRegistry([feed]).schedules == list(feed.schedules)
    worker = Worker(Settings(), jobs=[feed], periodic=list(feed.schedules))
    assert [e.name for e in worker.periodic] == ["feed"]
    other = every(10, feed, name="feed")
    with pytest.raises(ValueError, match="names must be unique"):
        Worker(Settings(), jobs=[feed], periodic=[other])

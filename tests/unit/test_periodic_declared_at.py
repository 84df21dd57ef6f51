"""A bad periodic declaration names the user's file and line (issue 25 §3), in the
message and as the traceback's last frame, whichever way it was declared."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import pytest

from cogworker_async import periodic
from cogworker_async.periodic.entries import cron, every

HERE = __file__


def _line_of(marker: str) -> int:
    with open(HERE, encoding="utf-8") as source:
        for number, line in enumerate(source, start=1):
            if marker in line and "_line_of" not in line:
                return number
    raise AssertionError(marker)


def _declare_cron() -> None:
    cron("61 * * * *", "tick")  # declared: bad cron


def _declare_every() -> None:
    every(-1, "tick")  # declared: bad every


def _declare_zone() -> None:
    cron("* * * * *", "tick", tz="Mars/Olympus")  # declared: bad zone


def _declare_misfire() -> None:
    cron("* * * * *", "tick", misfire="later")  # type: ignore[arg-type]  # declared: bad misfire


def _declare_decorated() -> None:
    @periodic("not cron at all")  # declared: bad decorator
    async def nightly() -> None: ...


def _declare_on_job() -> None:
    from cogworker_async import job

    @periodic("* * * * *", retry=3)  # declared: options twice
    @job
    async def twice() -> None: ...


@pytest.mark.parametrize(
    ("declare", "error", "marker", "says"),
    [
        (_declare_cron, ValueError, "declared: bad cron", "bad cron expression '61 * * * *'"),
        (_declare_every, ValueError, "declared: bad every", "every() seconds"),
        (_declare_zone, ValueError, "declared: bad zone", "unknown time zone 'Mars/Olympus'"),
        (_declare_misfire, ValueError, "declared: bad misfire", "misfire must be"),
        (_declare_decorated, ValueError, "declared: bad decorator", "bad cron expression"),
        (_declare_on_job, TypeError, "declared: options twice", "in @job, not here"),
    ],
)
def test_the_error_names_the_declaring_line(
    declare: Callable[[], None], error: type[Exception], marker: str, says: str
) -> None:
    with pytest.raises(error) as caught:
        declare()
    where = f"{HERE}:{_line_of(marker)}"
    message = str(caught.value)
    assert message.startswith(f"{where}: "), message
    assert says in message
    assert message.count(HERE) == 1  # named once, however many wrappers it passed
    last = traceback.extract_tb(caught.value.__traceback__)[-1]
    assert (last.filename, last.lineno) == (HERE, _line_of(marker))


def test_a_good_declaration_is_untouched() -> None:
    entry: Any = cron("*/5 * * * *", "tick", tz="Europe/Berlin")
    assert entry.expression == "*/5 * * * *"

"""The worker's duties, declared one way: what each maker gives for the parts present."""

from __future__ import annotations

import logging
import random
from types import SimpleNamespace
from typing import Any, cast

from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.worker.assembly import Parts
from cogworker_async.worker.duties import DUTIES, Duty


async def _nothing(*_: Any) -> None:
    pass


def _parts(*, reliable: bool, periodic: bool) -> Parts:
    part = SimpleNamespace(
        once=_nothing,
        check_once=_nothing,
        listen=_nothing,
        wait=_nothing,
        request_check=lambda: None,
        pass_once=_nothing,
        tick=_nothing,
        interval=lambda: 1.0,
    )
    fake = SimpleNamespace(
        redis=None,
        keys=Keys("duties"),
        settings=Settings(),
        logger=logging.getLogger("test.duties"),
        rng=random.Random(0),
        key_guard=part,
        reconciler=part,
        aborts=part,
        releases=part,
        recovery=part if reliable else None,
        ticker=part if periodic else None,
    )
    return cast(Parts, fake)


def _duties(parts: Parts) -> list[Duty]:
    return [duty for make in DUTIES for duty in make(parts)]


def test_every_duty_comes_from_one_list_and_absent_parts_give_none() -> None:
    full = {d.name for d in _duties(_parts(reliable=True, periodic=True))}
    assert full == {
        "Scheduled poller",
        "Scheduled poller wake-up",
        "Orphan recovery",
        "Reconcile",
        "Key guard",
        "Periodic ticker",
        "Abort listener",
        "Abort check",
        "Unique releases",
        "Limit timers",
    }
    basic = {d.name for d in _duties(_parts(reliable=False, periodic=False))}
    assert basic == full - {"Orphan recovery", "Periodic ticker"}


def test_listeners_have_no_interval_and_loops_a_positive_one() -> None:
    for duty in _duties(_parts(reliable=True, periodic=True)):
        if duty.name in ("Scheduled poller wake-up", "Abort listener"):
            assert duty.interval is None
        else:
            assert duty.interval is not None
            assert duty.interval() > 0

"""Slot arithmetic (pure functions of ``now``), DST in a named zone, misfire at start."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from cogworker_async.periodic import cron, every
from cogworker_async.periodic.timing import (
    Due,
    catch_up_slot,
    claim_life,
    due_slots,
    latest_slot,
    next_slot,
    on_time_window,
    slots_between,
    typical_interval,
)

BERLIN = ZoneInfo("Europe/Berlin")


def at(*parts: int, fold: int = 0) -> float:
    return datetime(*parts, tzinfo=BERLIN, fold=fold).timestamp()  # type: ignore[misc]


def runs(expression: str, since: float, until: float) -> list[datetime]:
    entry = cron(expression, "x", tz="Europe/Berlin", name="n")
    return [datetime.fromtimestamp(s, BERLIN) for s in slots_between(entry, since, until, 100)]


def test_every_slots_are_multiples_of_the_period() -> None:
    entry = every(5, "x")
    assert next_slot(entry, 100.0) == 105.0
    assert next_slot(entry, 101.3) == 105.0
    assert latest_slot(entry, 104.9) == 100.0
    assert slots_between(entry, 100.0, 120.0) == [105.0, 110.0, 115.0, 120.0]


def test_fall_back_day_fires_0230_exactly_once() -> None:
    # 2026-10-25: Berlin goes from 03:00 CEST back to 02:00 CET, so 02:30 happens twice.
    fired = runs("30 2 * * *", at(2026, 10, 24, 12), at(2026, 10, 26, 12))
    assert [(d.isoformat()) for d in fired] == [
        "2026-10-25T02:30:00+02:00",  # the first 02:30 (CEST) only
        "2026-10-26T02:30:00+01:00",
    ]
    # A process looking from inside the repeated hour does not fire it again.
    entry = cron("30 2 * * *", "x", tz="Europe/Berlin")
    assert next_slot(entry, at(2026, 10, 25, 2, 45, fold=1)) == at(2026, 10, 26, 2, 30)


def test_spring_forward_day_fires_the_skipped_0230_once_at_0300() -> None:
    # 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist; cronsim
    # (Debian cron) runs it at the end of the gap.
    fired = runs("30 2 * * *", at(2026, 3, 28, 12), at(2026, 3, 30, 12))
    assert [d.isoformat() for d in fired] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]


def test_hourly_entries_keep_one_slot_per_real_hour_across_fall_back() -> None:
    fired = runs("0 * * * *", at(2026, 10, 25, 1, 30), at(2026, 10, 25, 4, 30))
    assert [d.isoformat() for d in fired] == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
        "2026-10-25T04:00:00+01:00",
    ]


def test_latest_slot_of_a_cron_entry() -> None:
    entry = cron("*/5 * * * *", "x")
    assert latest_slot(entry, 1_000_000.0) == 999_900.0
    assert latest_slot(entry, 999_900.0) == 999_900.0


def test_catch_up_slot_by_misfire_policy() -> None:
    skip = every(10, "x")
    once = every(10, "x", misfire="run_once")
    graced = every(10, "x", misfire="run_once", grace=5)
    # Stopped after slot 100, back at 163: missed 110..160.
    assert catch_up_slot(skip, 163.0, 100.0) is None
    assert catch_up_slot(once, 163.0, 100.0) == 160.0
    assert catch_up_slot(graced, 163.0, 100.0) == 160.0
    assert catch_up_slot(graced, 167.0, 100.0) is None  # the latest missed is 7 s old > grace
    assert catch_up_slot(once, 163.0, 160.0) is None  # that slot already ran
    assert catch_up_slot(once, 163.0, None) is None  # a new entry missed nothing


def test_definitions_are_checked_and_hashed() -> None:
    with pytest.raises(ValueError, match="cron expression"):
        cron("61 * * * *", "x")
    with pytest.raises(ValueError, match="misfire"):
        every(1, "x", misfire="always")  # type: ignore[arg-type]
    assert every(1, "x").digest == every(1, "x").digest
    assert every(1, "x").digest != every(2, "x").digest
    assert cron("* * * * *", "x").digest != cron("* * * * *", "x", tz="Europe/Berlin").digest


def test_on_time_window_is_half_the_interval_between_2_and_60_s() -> None:
    assert on_time_window(1.0) == 2.0
    assert on_time_window(10.0) == 5.0
    assert on_time_window(60.0) == 30.0
    assert on_time_window(86400.0) == 60.0


def test_a_claim_lives_its_on_time_window_plus_three_intervals_at_least_a_minute() -> None:
    # every second: slot 100 claimed at 100.5 lives until 100 + 2 + 60.
    assert claim_life(100.0, 100.5, 1.0) == 61.5
    # every minute: until 60 + 30 + 180.
    assert claim_life(60.0, 61.0, 60.0) == 209.0
    # nightly: until the slot + 60 s + 3 days (one key at a time).
    assert claim_life(0.0, 1.0, 86400.0) == 60.0 + 3 * 86400.0 - 1.0
    # Never less than a second, however late the claim.
    assert claim_life(0.0, 10_000.0, 1.0) == 1.0


def test_due_slots_split_on_time_from_missed_without_walking_the_gap() -> None:
    entry = every(1, "x")
    # A second late tick: both slots on time.
    assert due_slots(entry, 100.0, 102.5, 2.0) == Due([101.0, 102.0])
    # An hour away: the two on-time slots, and the ends of the missed ones.
    assert due_slots(entry, 100.0, 3700.5, 2.0) == Due([3699.0, 3700.0], 101.0, 3698.0)
    minutely = cron("* * * * *", "x")
    assert due_slots(minutely, 0.5, 340.0, 30.0) == Due([], 60.0, 300.0)
    assert due_slots(minutely, 0.5, 310.0, 30.0) == Due([300.0], 60.0, 240.0)
    assert due_slots(minutely, 0.5, 30.0, 30.0) == Due([])


def test_typical_interval_of_every_and_cron() -> None:
    assert typical_interval(every(5, "x"), 0.0) == 5.0
    assert typical_interval(cron("*/2 * * * * *", "x"), 0.0) == 2.0
    assert typical_interval(cron("0 3 * * *", "x"), 0.0) == 86400.0

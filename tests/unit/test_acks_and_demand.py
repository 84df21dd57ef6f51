"""AckBook (acks waiting or in flight) and Demand (how many jobs to ask for).

Pure bookkeeping, no Redis: the fetcher's integration and chaos tests drive
both through real calls; these pin the rules themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from cogworker_async.store.commands import Ack
from cogworker_async.worker.acks import AckBook
from cogworker_async.worker.demand import AHEAD_BATCHES, MAX_BATCH, Demand


def _ack(n: int) -> Ack:
    return Ack(f"job-{n}".encode(), f"jid{n}")


def test_a_sent_ack_is_out_until_its_call_is_answered() -> None:
    book = AckBook()
    book.add(_ack(1))
    assert book.waiting
    assert book.out
    assert not book.calls_out
    call = object()
    assert book.send(call) == [_ack(1)]
    assert not book.waiting
    assert book.out
    assert book.calls_out
    assert book.pending_raws() == [b"job-1"]
    assert book.answered(call, []) == []
    assert not book.out
    assert not book.calls_out
    assert book.pending_raws() == []


def test_a_failed_call_puts_its_acks_back_first_in_line() -> None:
    book = AckBook()
    book.add(_ack(1))
    call = object()
    book.send(call)
    book.add(_ack(2))  # finished while the call was out
    book.failed(call)
    assert not book.calls_out
    assert book.send(object()) == [_ack(1), _ack(2)]


def test_a_resent_ack_finding_its_job_gone_is_not_reported() -> None:
    book = AckBook()
    book.add(_ack(1))
    first = object()
    book.send(first)
    book.failed(first)  # the call may have run before the link dropped
    book.add(_ack(2))
    second = object()
    book.send(second)
    # Both jobs come back missing: only the one never sent before is news.
    assert book.answered(second, [_ack(1), _ack(2)]) == [_ack(2)]
    # Once answered, job-1 is no longer "resent": a later loss of it would count.
    book.add(_ack(1))
    third = object()
    book.send(third)
    assert book.answered(third, [_ack(1)]) == [_ack(1)]


def test_take_all_empties_waiting_and_in_flight() -> None:
    book = AckBook()
    book.add(_ack(1))
    book.send(object())
    book.add(_ack(2))
    assert book.take_all() == [_ack(1), _ack(2)]
    assert not book.out
    assert not book.calls_out


@dataclass
class _Handout:
    waiting_now: int = 0
    ready: list[bytes] = field(default_factory=list)
    quick: bool = True

    def waiting(self) -> int:
        return self.waiting_now


@dataclass
class _Shedder:
    slow: bool = False
    hold_none: bool = False


@dataclass
class _GiveBack:
    busy: bool = False


def _demand(prefetch: int, **handout: Any) -> tuple[Demand, _Handout, _Shedder, _GiveBack]:
    h, s, g = _Handout(**handout), _Shedder(), _GiveBack()
    return Demand(cast(Any, h), cast(Any, s), cast(Any, g), prefetch=prefetch), h, s, g


def test_want_is_waiting_plus_ahead_minus_held() -> None:
    demand, handout, _, _ = _demand(5, waiting_now=3, ready=[b"a"])
    assert demand.ahead() == 5  # no batch seen yet
    assert demand.want() == 3 + 5 - 1
    demand.last_batch = 10
    assert demand.ahead() == 5 + AHEAD_BATCHES * 10
    handout.quick = False
    assert demand.ahead() == 5


def test_slow_jobs_or_no_prefetch_hold_nothing_ahead() -> None:
    demand, _, shedder, _ = _demand(5, waiting_now=0)
    demand.last_batch = 100
    shedder.slow = True
    assert demand.ahead() == 5
    none, _, _, _ = _demand(0, waiting_now=2)
    none.last_batch = 100
    assert none.ahead() == 0
    assert none.want() == 2


def test_jobs_held_unrun_turn_prefetch_off_too() -> None:
    """Issue 26 §2: a job held within prefetch waits as surely as one beyond it."""
    demand, _, shedder, _ = _demand(5, waiting_now=2)
    demand.last_batch = 100
    shedder.slow = shedder.hold_none = True
    assert demand.ahead() == 0
    assert demand.want() == 2  # the waiting processors' jobs only


def test_want_is_capped_at_one_batch() -> None:
    demand, _, _, _ = _demand(0, waiting_now=MAX_BATCH * 3)
    assert demand.want() == MAX_BATCH


def test_nothing_is_wanted_while_closed_isolating_or_giving_back() -> None:
    demand, _, _, give_back = _demand(5, waiting_now=4)
    assert demand.want() > 0
    demand.isolating = 1
    assert demand.want() == 0
    demand.isolating = 0
    give_back.busy = True
    assert demand.want() == 0
    give_back.busy = False
    demand.closed = True
    assert demand.want() == 0


def test_lanes_ask_for_nothing_while_dry_and_count_what_is_asked() -> None:
    demand, _, _, _ = _demand(0, waiting_now=4)
    assert demand.lane_want() == 4
    demand.requested = 3
    assert demand.lane_want() == 1
    demand.dry = True
    assert demand.lane_want() == 0
    assert demand.want() == 4  # still short: the blocking wait is what serves it


def test_starved_when_a_processor_or_half_the_batch_ahead_would_go_without() -> None:
    demand, _, _, _ = _demand(0, waiting_now=2, ready=[b"a"])
    assert demand.starved(acks_waiting=False)  # two wait, one ready
    demand.requested = 1
    assert not demand.starved(acks_waiting=False)  # the call out covers it
    ahead, h2, _, _ = _demand(2, waiting_now=0, ready=[b"a"] * 5)
    ahead.last_batch = 10  # ahead() = 22: half is 11, five held
    assert ahead.starved(acks_waiting=False)
    h2.ready = [b"a"] * 11
    assert not ahead.starved(acks_waiting=False)


def test_isolating_is_urgent_only_for_acks_and_closing_never() -> None:
    demand, _, _, _ = _demand(0, waiting_now=5)
    demand.isolating = 1
    assert not demand.starved(acks_waiting=False)
    assert demand.starved(acks_waiting=True)  # a suspect waits for every ack to land
    demand.isolating = 0
    demand.closed = True
    assert not demand.starved(acks_waiting=True)

"""Acks on their way to Redis: waiting for the next call, or in a call not yet answered.

Invariant: a finished job's ack is in exactly one place until a call carrying
it is answered — waiting here for the next call, or in flight with one — so
shutdown and the heartbeat can always name every finished job still on the
in-progress list. A call that fails puts its acks back, first in line.

A call that fails may still have run before the link dropped: its acks are
then resent, and a resent ack that finds its job gone is no sign of a second
run, so such a "missing" ack is not reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from cogworker_async.store.commands import Ack, Start


class AckBook:
    def __init__(self) -> None:
        self._waiting: list[Ack] = []
        # Tracked jobs' "working" writes waiting for the next fetch (best effort:
        # never part of ``out``; a failed call puts them back, a shutdown drops them).
        # By jid: an end that finds its start still here takes it over.
        self._starts: dict[str, Start] = {}
        # A call's id → the acks it carries, until its reply is in.
        self._in_flight: dict[object, list[Ack]] = {}
        self._resent: set[bytes] = set()

    def add(self, ack: Ack) -> None:
        self._waiting.append(ack)

    def add_start(self, start: Start) -> None:
        self._starts[start.jid] = start

    def take_start(self, jid: str) -> Start | None:
        """Job ``jid``'s "working" write if it still waits (no call carries it yet):
        taken out, for its end to write in its stead."""
        return self._starts.pop(jid, None)

    def take_starts(self) -> list[Start]:
        """The "working" writes waiting, now carried by a call."""
        starts = list(self._starts.values())
        self._starts = {}
        return starts

    def starts_failed(self, starts: list[Start]) -> None:
        """Their call failed: they wait again (unless their end took over)."""
        for start in starts:
            self._starts.setdefault(start.jid, start)

    @property
    def starts_waiting(self) -> bool:
        """ "working" writes wait for a call."""
        return bool(self._starts)

    @property
    def waiting(self) -> bool:
        """Acks (or "working" writes) wait for a call."""
        return bool(self._waiting) or bool(self._starts)

    @property
    def out(self) -> bool:
        """Finished jobs whose ack has not landed yet (they are still on the list)."""
        return bool(self._waiting) or any(self._in_flight.values())

    @property
    def calls_out(self) -> bool:
        """Some call (carrying acks or not) has not been answered."""
        return bool(self._in_flight)

    def send(self, call_id: object) -> list[Ack]:
        """Everything waiting, now carried by the call ``call_id``."""
        acks, self._waiting = self._waiting, []
        self._in_flight[call_id] = acks
        return acks

    def failed(self, call_id: object) -> None:
        """The call failed: its acks wait again, first in line, marked as resent."""
        acks = self._in_flight.pop(call_id)
        self._waiting[:0] = acks
        self._resent.update(a.raw for a in acks)

    def answered(self, call_id: object, missing: Sequence[Ack]) -> list[Ack]:
        """The call's reply is in: its acks are done. Returns the missing acks to report
        (a resent ack finding its job gone is left out)."""
        acks = self._in_flight.pop(call_id)
        report = [m for m in missing if m.raw not in self._resent]
        if self._resent:
            self._resent.difference_update(a.raw for a in acks)
        return report

    def pending_raws(self) -> list[bytes]:
        """Finished jobs whose ack hasn't landed yet (still on the list, not strays)."""
        in_flight = [a.raw for acks in self._in_flight.values() for a in acks]
        return in_flight + [a.raw for a in self._waiting]

    def take_all(self) -> list[Ack]:
        """Every ack not yet landed, taken out (shutdown sends them itself)."""
        in_flight = [a for acks in self._in_flight.values() for a in acks]
        acks, self._waiting = [*in_flight, *self._waiting], []
        self._in_flight.clear()
        return acks

"""One typed wrapper per Lua script of a job's own life: fetch, ack, file (and
hand over) a failure, give back, graduate, bury. Callers get small frozen
dataclasses back. The other families: ``orphans`` (recovery), ``locks``
(unique locks, operator drops), ``aborts``, ``admin``.

One module per part of that life: ``acks`` (what an ack carries, ``ack``),
``fetching`` (``fetch``), ``filing`` (a failure filed or handed over),
``moves`` (give back, graduate, bury), ``days`` (the per-day stats' day).
"""

from __future__ import annotations

from cogworker_async.store.commands.acks import (
    END_FIELDS,
    Ack,
    End,
    Start,
    _ack_args,
    _end_args,
    ack,
    status_json,
    strings_json,
)
from cogworker_async.store.commands.days import DAY_STAT_TTL, day_name, today
from cogworker_async.store.commands.fetching import FetchResult, Renewal, fetch
from cogworker_async.store.commands.filing import (
    FileOutcome,
    Filing,
    file,
    file_unsettled,
    filing_event,
    park_unsettled,
    unsettled_record,
)
from cogworker_async.store.commands.moves import (
    GiveBackResult,
    GraduateResult,
    Graduation,
    bury,
    give_back,
    graduate,
)

__all__ = [
    "DAY_STAT_TTL",
    "END_FIELDS",
    "Ack",
    "End",
    "FetchResult",
    "FileOutcome",
    "Filing",
    "GiveBackResult",
    "GraduateResult",
    "Graduation",
    "Renewal",
    "Start",
    "_ack_args",
    "_end_args",
    "ack",
    "bury",
    "day_name",
    "fetch",
    "file",
    "file_unsettled",
    "filing_event",
    "give_back",
    "graduate",
    "park_unsettled",
    "status_json",
    "strings_json",
    "today",
    "unsettled_record",
]

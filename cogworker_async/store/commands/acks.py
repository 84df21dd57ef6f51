"""A finished job's ack: what it carries (``Ack``, a tracked job's ``End`` and
``Start``) and how a call's acks go on the wire; ``ack`` (``fetch`` acks too)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple

import orjson
from redis.asyncio import Redis

from cogworker_async import holds
from cogworker_async.holds import Event, Hold
from cogworker_async.keys import Keys
from cogworker_async.store import run_history as history
from cogworker_async.store.commands.days import DAY_STAT_TTL, today
from cogworker_async.store.run_history import Run
from cogworker_async.store.scripts import EncodableArg, script


class End(NamedTuple):
    """What a tracked job's ack writes of its end, in the ack's own step
    (``includes/acked_ends.lua``): its final status fields (``status``, as
    ``status_json`` encodes them, b"" for none) kept ``status_ttl`` s, and its kept result
    (``envelope``, b"" for none), in the one-key shape (``store/results.py``: the
    envelope's ``gone_for``), its key kept ``result_ttl`` s, ``gone_for`` included."""

    jid: str
    status: bytes
    status_ttl: int
    envelope: bytes
    result_ttl: int


class Start(NamedTuple):
    """A tracked job's ``working`` status, riding the next fetch
    (``includes/acked_ends.lua``, ``write_started``): its fields (sent as
    ``status_json`` encodes them; a list is that form already, flat and all
    strings, name then value) and its start (``started_at``, as the
    fields say), kept ``status_ttl`` s; skipped when the hash already tells this
    run's end. Encoded only when a call carries it: an end that finds it still
    waiting writes its fields with its own instead."""

    jid: str
    fields: Mapping[str, Any] | list[str]
    started_at: float
    status_ttl: int


def status_json(fields: Mapping[str, Any]) -> bytes:
    """Status fields as ``includes/acked_ends.lua`` writes them: a flat JSON array
    of strings, name then value (each value as redis-py would send it: a str as
    is, a number by ``str``), which the script passes to HSET as it decodes it
    (an object would cost it a loop per field)."""
    return orjson.dumps(
        [x for k, v in fields.items() for x in (k, v if isinstance(v, str) else str(v))]
    )


def strings_json(fields: Mapping[str, str]) -> bytes:
    """``status_json`` of fields the caller knows are all strings (the worker's
    tracked path builds them so): flattened at C speed, no look at each value."""
    return orjson.dumps(list(chain.from_iterable(fields.items())))


class Ack(NamedTuple):
    """A finished job to acknowledge: the raw bytes as fetched and its jid ("" if unknown).

    Only the raw bytes go to Redis (they are how the job is found on the
    in-progress list); the jid names the job in the worker's own logs.
    ``run``: its name, start and end for the metrics history (None: history off).
    ``holds``: what the job holds (an ``until_executed`` job's unique lock, an
    overlap=False periodic entry's running lock, ...): settled as each kind's
    ack rule says, in the ack's own step, owner-checked, when the ack removes
    the job; () for none.
    ``end``: its kept result and final status (a tracked job), written with the
    ack; None for a plain job.
    ``member``: the batch (bid) whose membership is all the job holds
    (``holds.batch_member``), counted as a success in the ack's step as its
    ``Hold`` would be, without one ("" for none; ``holds`` is then ()).
    ``slots``: the concurrency limits (names) whose slots are all the job
    holds (``holds.slots_only``), released in the ack's step as their
    ``Hold``s would be, without them (() for none; ``holds`` is then ()).
    """

    raw: bytes
    jid: str
    run: Run | None = None
    holds: tuple[Hold, ...] = ()
    end: End | None = None
    member: str = ""
    slots: Sequence[str] = ()


_raw_of = operator.itemgetter(0)  # Ack.raw
_holds_of = operator.itemgetter(3)  # Ack.holds
_end_of = operator.itemgetter(4)  # Ack.end
_jid_of = operator.itemgetter(1)  # Ack.jid
_member_of = operator.itemgetter(5)  # Ack.member
_slots_of = operator.itemgetter(6)  # Ack.slots
END_FIELDS = 5  # what one End puts on the wire (``includes/acked_ends.lua``)


def _ack_args(keys: Keys, acks: Sequence[Ack]) -> list[EncodableArg]:
    """The history groups and tags (both "" when no ack is counted), the acks,
    then the holds block (see ``includes/holds.lua``): ``0`` when no finished
    job holds anything, so a plain ack pays one argument per call, not per job."""
    groups: bytes | str = ""
    tags: bytes | str = ""
    # The setting is per process, so a call's acks carry runs all or none: a
    # look at both ends, not a scan of every ack on the path with history off.
    if acks and (acks[0].run is not None or acks[-1].run is not None):
        groups, tags = history.pack([ack.run for ack in acks], keys.history_prefix)
    args: list[EncodableArg] = [groups, tags, len(acks)]
    args.extend(map(_raw_of, acks))  # at C speed, as the look for holds below
    with_holds = any(map(_holds_of, acks))
    with_members = any(map(_member_of, acks))
    with_slots = any(map(_slots_of, acks))
    if not with_holds and not with_members and not with_slots:  # the plain case
        args.append(0)
        return args
    held: list[EncodableArg] = []
    if with_holds:
        held.extend(
            holds.encode_calls(
                keys,
                ((position, ack.holds) for position, ack in enumerate(acks, 1) if ack.holds),
                Event.ACK,
            )
        )
    if with_members:  # the batch members read without a Hold (``Ack.member``)
        held.extend(holds.encode_members(keys, map(_member_of, acks), map(_jid_of, acks)))
    if with_slots:  # the limited jobs read without a Hold (``Ack.slots``)
        held.extend(holds.encode_slots(keys, map(_slots_of, acks), map(_jid_of, acks)))
    args.append(len(held) // holds.HOLD_FIELDS)
    args.extend(held)
    return args


def _end_args(keys: Keys, acks: Sequence[Ack], starts: Sequence[Start] = ()) -> list[EncodableArg]:
    """The ends block (see ``includes/acked_ends.lua``), the last arguments of the
    call: nothing at all when no finished job keeps a result or tracks its
    status and no "working" write rides along (a plain batch pays nothing for
    it), else the tracking prefix, the count and one group per ``End``, then
    the count and one group per ``Start``."""
    if not starts and not any(map(_end_of, acks)):  # the plain case
        return []
    ends = [ack.end for ack in acks if ack.end is not None]
    args: list[EncodableArg] = [keys.tracking_prefix, len(ends)]
    for end in ends:
        args.extend(end)
    args.append(len(starts))
    for start in starts:
        fields = start.fields
        encoded = orjson.dumps(fields) if isinstance(fields, list) else status_json(fields)
        args.extend((start.jid, encoded, start.started_at, start.status_ttl))
    return args


async def ack(redis: Redis, keys: Keys, *, identity: str, acks: Sequence[Ack]) -> list[Ack]:
    """Acknowledge finished jobs; returns those that were already gone from the list."""
    script_keys = [
        keys.in_progress(identity),
        keys.stats_processed,
        keys.stats_processed_on(today()),
    ]
    args = [keys.orphanings_prefix, DAY_STAT_TTL, *_ack_args(keys, acks), *_end_args(keys, acks)]
    missing = await script("ack").run(redis, script_keys, args)
    return [acks[i - 1] for i in missing]

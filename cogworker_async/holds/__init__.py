"""What a job holds across its life, and what becomes of each hold when it settles.

Invariant: a hold is a Redis string whose value is its owner (the job's jid),
or (a "member" kind: a limiter slot) the owner's membership in a set;
it is released, or kept for a while longer, only by its owner, only under its
kind's key prefix, and in the same atomic Lua step that settles the job
(``lua_scripts/includes/holds.lua``), so a job never ends with its claims
left behind nor a claim outlives the job that took it.

A kind of hold is one ``HoldKind`` declaration: its key prefix (from
``Keys``), where a job's payload names it (``InPayload``), how long it is kept
by default, and one ``Rule`` per settling ``Event``. The scripts never name a
kind: where the worker has the job decoded (ack, filing, abort) it turns each
hold into a release or a keep (``encode``); where a script meets the raw
payload (recovery, give back, burial, operator actions) it gets the whole
table (``kinds_table``) and reads the payload by it. Either way the include
carries it out, so a new kind (a limiter slot, a batch membership) edits no
script.
"""

from __future__ import annotations

from cogworker_async.holds.declarations import BATCH, LIMIT_SLOT, PERIODIC_RUNNING, UNIQUE
from cogworker_async.holds.encoding import (
    block,
    encode,
    encode_calls,
    encode_members,
    encode_slots,
    kinds_spec,
    kinds_table,
    released,
)
from cogworker_async.holds.kinds import (
    HOLD_FIELDS,
    KINDS,
    MEMBER_PREFIX_END,
    Event,
    Hold,
    HoldKind,
    InPayload,
    Path,
    Rule,
    declare,
    is_held_key,
    kind_of,
    withdraw,
)
from cogworker_async.holds.reading import batch_member, hold_in, holds_in, read, slots_only

__all__ = [
    "BATCH",
    "HOLD_FIELDS",
    "KINDS",
    "LIMIT_SLOT",
    "MEMBER_PREFIX_END",
    "PERIODIC_RUNNING",
    "UNIQUE",
    "Event",
    "Hold",
    "HoldKind",
    "InPayload",
    "Path",
    "Rule",
    "batch_member",
    "block",
    "declare",
    "encode",
    "encode_calls",
    "encode_members",
    "encode_slots",
    "hold_in",
    "holds_in",
    "is_held_key",
    "kind_of",
    "kinds_spec",
    "kinds_table",
    "read",
    "released",
    "slots_only",
    "withdraw",
]

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

import enum
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from cogworker_async.keys import Keys

# What ``encode`` puts on the wire for one hold: (position, prefix, key,
# owner, ttl ms or "" to release); see ``includes/holds.lua``.
HOLD_FIELDS = 5

# A kind whose prefix ends so holds set members, not strings: its key is a set
# (a concurrency limit's running jobs) and the owner is one member of it. The
# include tells the shapes apart by this ending alone (no TYPE call per hold);
# ``declare`` checks that a "member" kind's prefix has it and no other has.
MEMBER_PREFIX_END = ":limits:"


class Event(enum.StrEnum):
    """A way a job settles (or moves) in which its holds are released or kept."""

    ACK = "ack"  # it succeeded
    RETRY = "retry"  # its failure is filed into the retry set
    DEAD = "dead"  # its failure is filed into the dead set
    DISCARD = "discard"  # its failure is dropped (``retry=False``, ``retry_in``)
    ABORT = "abort"  # it was aborted, or its retry met an abort's tombstone
    RECOVERY_REQUEUE = "recovery_requeue"  # its dead process's list went back to queues
    # Its own process put it back unfinished: on shutdown, or a give back of a
    # job fetched and not started.
    SHUTDOWN_REQUEUE = "shutdown_requeue"
    BURIAL = "burial"  # ProcessDied: orphaned too often, filed into dead
    OPERATOR_DELETE = "operator_delete"  # removed from a queue or set by hand
    OPERATOR_KILL = "operator_kill"  # moved into the dead set by hand
    OPERATOR_RETRY = "operator_retry"  # put back on its queue by hand


class Rule(enum.Enum):
    """What an event does to a hold."""

    RELEASE = "release"  # deleted, if its owner still holds it
    # Held again by its owner for the job's wait (a retry's delay) plus the
    # hold's own TTL: set when free or already the owner's, a newer owner's
    # left alone. A release the step could not make (a filing dropped at
    # shutdown) is handed over to the next process (``DeferredReleases``).
    KEEP = "keep"
    LEAVE = "leave"  # not touched: the job still holds it as it was


Path = tuple[str, ...]  # a field inside a payload: ("unique", "key")


@dataclass(frozen=True, slots=True)
class InPayload:
    """Where a job's payload names its hold of a kind; the owner is the job's jid.

    ``key``: the field holding the key, or (``named``) the name the key is
    the kind's prefix plus. ``ttl``: the field holding its own TTL (s), if
    any. ``when``: a field that must equal a value for the job to hold it.
    ``many``: the field holds a list of names (each a hold of the kind,
    ``named`` or not), not one key.
    ``unless_started``: a field that, equal to its value, says the job gave
    the hold back as it started (an ``until_executing`` unique job): read so
    on the paths after a start (ack, filing, burial, requeue), not on those
    of a waiting job (an operator's delete, kill or retry, an abort of a
    queued job), where it still holds it. A payload whose text lacks ``"<key[0]>"``
    is not decoded for it (plain jobs pay a substring search).
    """

    key: Path
    named: bool = False
    ttl: Path | None = None
    when: tuple[Path, Any] | None = None
    unless_started: tuple[Path, Any] | None = None
    many: bool = False


@dataclass(frozen=True, slots=True)
class HoldKind:
    """One kind of hold: where its keys live and what each event does to it."""

    name: str
    prefix: Callable[[Keys], str]  # every key of the kind starts with it
    default_ttl: float  # s, kept for when a hold names no TTL of its own
    rules: Mapping[Event, Rule]
    payload: InPayload | None = None  # None: carried by the worker only
    # "string": the key holds the owner; "member": the key is a set, the owner
    # one member (its prefix ends with MEMBER_PREFIX_END; released only, never kept).
    shape: str = "string"
    # A *counted* kind (a batch membership): its key is no lock but a record of
    # members, and a release counts how the member ended, per event it releases
    # on ("succeeded", "failed", "dead"; ``includes/batch_end.lua``). None: a
    # plain lock, released by deleting it.
    outcomes: Mapping[Event, str] | None = None

    def rule(self, event: Event) -> Rule:
        return self.rules[event]


@dataclass(frozen=True, slots=True)
class Hold:
    """A claim one job holds: ``key`` (under its kind's prefix) whose value is ``owner``.

    ``ttl``: how long (s) it is kept past a wait when a rule keeps it (None:
    the kind's default)."""

    kind: str
    key: str
    owner: str
    ttl: float | None = None


# The declared kinds, filled at import by the declarations below (and by a
# feature's own module, or a test, through ``declare``).
_KINDS: dict[str, HoldKind] = {}
KINDS: Mapping[str, HoldKind] = MappingProxyType(_KINDS)


def declare(kind: HoldKind) -> HoldKind:
    """Register a kind of hold; every event must have its rule."""
    missing = [event.value for event in Event if event not in kind.rules]
    if missing:
        raise ValueError(f"hold kind {kind.name!r} has no rule for {', '.join(missing)}")
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"hold kind {kind.name!r} is already declared")
    if kind.default_ttl <= 0:
        raise ValueError(f"hold kind {kind.name!r}: default_ttl must be positive")
    member = kind.prefix(Keys("ns")).endswith(MEMBER_PREFIX_END)
    if kind.shape not in ("string", "member") or member != (kind.shape == "member"):
        raise ValueError(
            f"hold kind {kind.name!r}: a member kind's prefix, and only its, ends with "
            f"{MEMBER_PREFIX_END!r}"
        )
    if kind.shape == "member" and any(rule is Rule.KEEP for rule in kind.rules.values()):
        raise ValueError(f"hold kind {kind.name!r}: a member hold is released, never kept")
    if kind.outcomes is not None:
        counted = [e.value for e, r in kind.rules.items() if r is Rule.RELEASE]
        unnamed = [name for name in counted if Event(name) not in kind.outcomes]
        if unnamed or any(r is Rule.KEEP for r in kind.rules.values()):
            raise ValueError(
                f"hold kind {kind.name!r}: a counted kind releases or leaves (never keeps), "
                f"with an outcome per release (none for {', '.join(unnamed) or '-'})"
            )
    _KINDS[kind.name] = kind
    return kind


def withdraw(name: str) -> None:
    """Forget a declared kind (a test's own kind, once the test is over)."""
    _KINDS.pop(name, None)


def is_held_key(key: str, prefix: str) -> bool:
    """Whether ``key`` may be a hold under ``prefix``: a payload names it, and a
    payload is data (a dead entry retried, a job from another producer), so no
    path writes a key it names unless it is under its kind's prefix of this
    namespace, with a name after it, and not a bookkeeping key of the prefix
    (those start with ``~``). The same rule as ``includes/holds.lua``'s."""
    return (
        bool(prefix)
        and len(key) > len(prefix)
        and key.startswith(prefix)
        and not key.startswith("~", len(prefix))
    )


def kind_of(hold: Hold) -> HoldKind:
    try:
        return _KINDS[hold.kind]
    except KeyError:
        raise ValueError(f"unknown hold kind {hold.kind!r} (declare it first)") from None


def _rules(**overrides: Rule) -> dict[Event, Rule]:
    """Every event releases, but those named."""
    rules = dict.fromkeys(Event, Rule.RELEASE)
    rules.update({Event(name): rule for name, rule in overrides.items()})
    return rules


# An `until_executed` unique job's lock (an `until_executing` one released its
# lock as it started, so it holds none). A retry keeps it for the delay plus
# unique_for (no duplicate gets in before the retry ran), an operator's retry
# re-takes it while the job waits; a requeue leaves it: the job still holds it.
UNIQUE = declare(
    HoldKind(
        "unique",
        prefix=lambda keys: keys.unique(""),
        default_ttl=3600.0,
        rules=_rules(
            retry=Rule.KEEP,
            operator_retry=Rule.KEEP,
            recovery_requeue=Rule.LEAVE,
            shutdown_requeue=Rule.LEAVE,
        ),
        payload=InPayload(
            key=("unique", "key"),
            ttl=("unique", "for"),
            unless_started=(("unique", "mode"), "until_executing"),
        ),
    )
)

# An overlap=False periodic entry's running lock: kept with its queued TTL
# whenever the run waits again (retry, requeue, an operator's retry), so the
# ticker starts no second run meanwhile; released when the run is over.
PERIODIC_RUNNING = declare(
    HoldKind(
        "periodic_running",
        prefix=lambda keys: keys.periodic_running_prefix,
        default_ttl=3600.0,
        rules=_rules(
            retry=Rule.KEEP,
            operator_retry=Rule.KEEP,
            recovery_requeue=Rule.KEEP,
            shutdown_requeue=Rule.KEEP,
        ),
        payload=InPayload(
            key=("periodic_pjid",),
            named=True,
            ttl=("periodic_queued_ttl",),
            when=(("periodic_until_executed",), True),
        ),
    )
)

# A concurrency limit's slot (cogworker_async/limits): the running job's jid in
# the set <ns>:limits:<key>, taken with the job by the fetch. Every ending
# releases it, requeues too (a job waiting on its queue holds no slot); the
# release unparks the oldest job parked on the key (includes/holds.lua).
LIMIT_SLOT = declare(
    HoldKind(
        "limit_slot",
        prefix=lambda keys: keys.limits_prefix,
        default_ttl=3600.0,
        rules=_rules(),
        payload=InPayload(key=("limit_slots",), named=True, many=True),
        shape="member",
    )
)


# A batch membership (workflows: ``client.batch``): the payload's ``batch``
# field names the batch, its key ``<ns>:batch:<bid>``. Released only at the
# job's end, each end counted (success, failure, death) by
# ``includes/batch_end.lua`` in the step that settles it; anything that runs
# the job again (a retry, a requeue, an operator's retry) leaves it.
BATCH = declare(
    HoldKind(
        "batch",
        prefix=lambda keys: keys.batch_prefix,
        default_ttl=3600.0,  # unused: a membership is never kept with a TTL
        rules=_rules(
            retry=Rule.LEAVE,
            operator_retry=Rule.LEAVE,
            recovery_requeue=Rule.LEAVE,
            shutdown_requeue=Rule.LEAVE,
        ),
        payload=InPayload(key=("batch",), named=True),
        outcomes={
            Event.ACK: "succeeded",
            Event.DEAD: "dead",
            Event.DISCARD: "failed",
            Event.ABORT: "failed",
            Event.BURIAL: "dead",
            Event.OPERATOR_DELETE: "failed",
            Event.OPERATOR_KILL: "dead",
        },
    )
)


def released(holds: Iterable[Hold], event: Event) -> list[Hold]:
    """The lock holds ``event`` releases (what a caller hands over when it cannot
    settle the job in a script step). A counted hold (a batch membership) is
    never handed over as a lock: the step that drops or files the job later
    (``requeue.lua``'s ``d:`` marks, ``file_unsettled.lua``) counts it from
    the payload."""
    return [
        hold
        for hold in holds
        if kind_of(hold).rule(event) is Rule.RELEASE and kind_of(hold).outcomes is None
    ]


def encode(
    keys: Keys, holds: Iterable[Hold], event: Event, *, wait: float = 0.0, position: int = 1
) -> list[str | int]:
    """The hold groups of one job for ``includes/holds.lua`` (without the count):
    (position, prefix, key, owner, ttl ms or "" to release) per hold the event
    releases or keeps; a hold it leaves is not sent. ``wait``: how long (s) the
    job waits before it runs again (a retry's delay), added to a kept TTL."""
    groups: list[str | int] = []
    for hold in holds:
        kind = kind_of(hold)
        rule = kind.rule(event)
        if rule is Rule.LEAVE:
            continue
        ttl: str | int = ""
        if kind.outcomes is not None:
            ttl = "@" + kind.outcomes[event]  # a counted release: how the member ended
        elif rule is Rule.KEEP:
            seconds = max(0.0, wait) + (kind.default_ttl if hold.ttl is None else hold.ttl)
            ttl = max(1, int(seconds * 1000))
        groups.extend((position, kind.prefix(keys), hold.key, hold.owner, ttl))
    return groups


def block(keys: Keys, holds: Iterable[Hold], event: Event, *, wait: float = 0.0) -> list[str | int]:
    """One job's whole hold block: the count, then its groups (``encode``)."""
    groups = encode(keys, holds, event, wait=wait)
    return [len(groups) // HOLD_FIELDS, *groups]


def _at(job: Mapping[str, Any], path: Path) -> Any:
    value: Any = job
    for name in path:
        if not isinstance(value, dict):
            return None
        value = value.get(name)
    return value


def _same(value: Any, expected: Any) -> bool:
    # JSON's true is not 1 (as in Lua): bools compare only with bools.
    return type(value) is type(expected) and value == expected


def _seconds(value: Any) -> float | None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if number and math.isfinite(value) and value > 0 else None


def hold_in(
    job: Mapping[str, Any], kind: HoldKind, keys: Keys, *, started: bool = True
) -> Hold | None:
    """The (first) hold of ``kind`` a decoded job names, or None (see ``holds_in``)."""
    return next(iter(holds_in(job, kind, keys, started=started)), None)


def holds_in(
    job: Mapping[str, Any], kind: HoldKind, keys: Keys, *, started: bool = True
) -> list[Hold]:
    """The holds of ``kind`` a decoded job names (as ``includes/holds.lua``
    reads them from the raw payload): one at most, or (``many``) one per name
    of its list. ``started``: the job's run began (see ``InPayload.unless_started``)."""
    spec = kind.payload
    if spec is None or spec.key[0] not in job:
        return []
    owner = job.get("jid")
    if not isinstance(owner, str) or not owner:
        return []
    if spec.when is not None and not _same(_at(job, spec.when[0]), spec.when[1]):
        return []
    gave_back = spec.unless_started
    if started and gave_back is not None and _same(_at(job, gave_back[0]), gave_back[1]):
        return []
    found = _at(job, spec.key)
    names = (found if isinstance(found, list) else []) if spec.many else [found]
    prefix = kind.prefix(keys)
    ttl = None if spec.ttl is None else _seconds(_at(job, spec.ttl))
    held = []
    for key in names:
        if not isinstance(key, str) or not key:
            continue
        full = prefix + key if spec.named else key
        if is_held_key(full, prefix):
            held.append(Hold(kind.name, full, owner, ttl))
    return held


def read(job: Mapping[str, Any], keys: Keys, *, started: bool = True) -> tuple[Hold, ...]:
    """Every hold a decoded job names in its payload, one per kind at most but
    for a ``many`` kind's (``started``: see ``hold_in``)."""
    found: list[Hold] = []
    for kind in _KINDS.values():
        # The field looked up first: a job that names none of the kinds (a
        # plain job) pays one dict lookup per kind, no call.
        spec = kind.payload
        if spec is not None and spec.key[0] in job:
            found.extend(holds_in(job, kind, keys, started=started))
    return tuple(found)


def kinds_table(keys: Keys) -> bytes:
    """The declared kinds as the JSON the payload-reading scripts take (one
    argument; see ``includes/holds.lua``, ``settle_payload_holds``)."""
    return orjson.dumps(kinds_spec(keys))


def kinds_spec(keys: Keys) -> list[dict[str, Any]]:
    """Per kind that a payload names: its prefix, default TTL (ms), where the
    payload names it, and its rule per event (``kinds_table`` before JSON)."""
    table = []
    for kind in _KINDS.values():
        spec = kind.payload
        if spec is None:
            continue
        table.append(
            {
                "mark": f'"{spec.key[0]}"',
                "key": spec.key,
                "named": spec.named,
                "ttl": spec.ttl or False,
                "when": spec.when or False,
                "unless_started": spec.unless_started or False,
                "many": spec.many,
                "prefix": kind.prefix(keys),
                "default_ttl": max(1, int(kind.default_ttl * 1000)),
                "rules": {event.value: rule.value for event, rule in kind.rules.items()},
                "outcomes": {e.value: o for e, o in (kind.outcomes or {}).items()} or False,
            }
        )
    return table

"""The kinds of hold, what each settling event does to one, and the registry of
declared kinds (``declare``, ``withdraw``, ``kind_of``)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

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


class Hold(NamedTuple):
    """A claim one job holds: ``key`` (under its kind's prefix) whose value is ``owner``.

    ``ttl``: how long (s) it is kept past a wait when a rule keeps it (None:
    the kind's default). A NamedTuple, not a frozen dataclass: one is made
    per unique job's ack and per batch member's end, and a frozen dataclass's
    ``__init__`` (a ``object.__setattr__`` per field) cost several times a tuple's."""

    kind: str
    key: str
    owner: str
    ttl: float | None = None


# The declared kinds, filled at import by ``declarations`` (and by a
# feature's own module, or a test, through ``declare``).
_KINDS: dict[str, HoldKind] = {}
KINDS: Mapping[str, HoldKind] = MappingProxyType(_KINDS)

# The payload fields that name a hold of a kind other than a plain batch
# membership ("batch" itself when that kind is not declared so): a job with
# a "batch" field and none of these holds that membership alone, and its ack
# reads it without the walk over the kinds (``reading.batch_member``). Kept in
# step (in place) by ``declare`` and ``withdraw``.
NOT_BATCH_FIELDS: list[str] = []
# The same for a plain concurrency limit's slots ("limit_slots"): a job with
# that field and none of these holds its slots alone (``reading.slots_only``).
NOT_SLOT_FIELDS: list[str] = []


def _note_fields() -> None:
    fields, others = [], []
    plain = False  # the kind named "batch" is the plain membership (``declarations.BATCH``)
    slots = False  # the kind named "limit_slot" is the plain slots (``declarations.LIMIT_SLOT``)
    for kind in _KINDS.values():
        spec = kind.payload
        if spec is None:
            continue
        if (
            kind.name == "batch"
            and spec == InPayload(key=("batch",), named=True)
            and kind.outcomes is not None
            and Event.ACK in kind.outcomes
            and kind.rules[Event.ACK] is Rule.RELEASE
        ):
            plain = True
        else:
            fields.append(spec.key[0])
        if (
            kind.name == "limit_slot"
            and spec == InPayload(key=("limit_slots",), named=True, many=True)
            and kind.shape == "member"
            and kind.outcomes is None
            and kind.rules[Event.ACK] is Rule.RELEASE
        ):
            slots = True
        else:
            others.append(spec.key[0])
    if not plain:
        fields.append("batch")  # no such membership declared: no job is read as one
    if not slots:
        others.append("limit_slots")  # no such slots declared: no job is read as such
    NOT_BATCH_FIELDS[:] = fields
    NOT_SLOT_FIELDS[:] = others


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
    _note_fields()
    return kind


# Each kind's prefix per namespace, built once: a batch member's end reads and
# encodes its hold, and a lambda plus an f-string each time were a fair part
# of what that cost.
_PREFIXES: dict[tuple[Callable[[Keys], str], str], str] = {}


def prefix_of(kind: HoldKind, keys: Keys) -> str:
    """``kind.prefix(keys)``, remembered (by the namespace's string: hashing a
    ``Keys`` runs its dataclass ``__hash__``, slower than the f-string)."""
    found = _PREFIXES.get((kind.prefix, keys.ns))
    if found is None:
        if len(_PREFIXES) >= 1024:  # many namespaces (tests): start again
            _PREFIXES.clear()
        found = _PREFIXES[(kind.prefix, keys.ns)] = kind.prefix(keys)
    return found


def withdraw(name: str) -> None:
    """Forget a declared kind (a test's own kind, once the test is over)."""
    _KINDS.pop(name, None)
    _note_fields()


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

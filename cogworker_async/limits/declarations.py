"""The limits a job declares (``@job(limits=[...])``, ``.options(limits=...)``),
resolved to concrete keys at enqueue and carried in its payload.

A limit's key is a string, or a function of the job's arguments giving one
(``lambda account_id: f"acct:{account_id}"``): a job of account 7 and one of
account 8 are limited apart. At enqueue every key is resolved, so the
payload's ``"limits"`` is all a fetch needs (``lua_scripts/includes/limits.lua``):
``[[kind, key, n], ...]``; the keys of the concurrency limits are also listed
in ``"limit_slots"``: the slots the job holds while it runs (the hold
``holds.LIMIT_SLOT``, released by every settling step).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogworker_async.timing import check_duration

LimitKey = str | Callable[..., Any]
"""A limit's key: a string, or a function of the job's arguments giving one."""

# The payload fields (see the module's docstring).
LIMITS = "limits"
LIMIT_SLOTS = "limit_slots"

# A key's most characters: it names Redis keys (<ns>:limits:<key>).
MAX_KEY = 200


def check_key_text(key: object, where: str) -> str:
    """A resolved key, or a ValueError/TypeError naming ``where``."""
    if not isinstance(key, str):
        raise TypeError(f"{where}: a limit key must be a str, got {type(key).__name__}")
    if not key or len(key) > MAX_KEY or key.startswith("~") or not key.isprintable():
        raise ValueError(
            f"{where}: a limit key must be 1-{MAX_KEY} printable characters, "
            f"not starting with '~', got {key!r}"
        )
    return key


def _check_key(key: object) -> None:
    if callable(key):
        return
    check_key_text(key, "limit")


def _check_count(n: object, name: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name} must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}")


@dataclass(frozen=True, slots=True)
class Concurrency:
    """At most ``limit`` jobs of ``key`` run at once, across all processes."""

    key: LimitKey
    limit: int
    kind = "concurrency"

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_count(self.limit, "a concurrency limit")

    def wire(self, key: str) -> list[Any]:
        return [self.kind, key, self.limit]


@dataclass(frozen=True, slots=True)
class Window:
    """At most ``limit`` jobs of ``key`` start in any ``per`` seconds."""

    key: LimitKey
    limit: int
    per: float
    kind = "window"

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_count(self.limit, "a window limit")
        check_duration(self.per, "a window's per")
        if self.per < 0.001:
            raise ValueError(f"a window's per must be at least 0.001 s, got {self.per}")

    def wire(self, key: str) -> list[Any]:
        return [self.kind, key, self.limit, self.per]


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket: ``capacity`` starts at once at most, refilled at
    ``per_second`` tokens a second."""

    key: LimitKey
    capacity: int
    per_second: float
    kind = "bucket"

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_count(self.capacity, "a bucket's capacity")
        check_duration(self.per_second, "a bucket's per_second")
        if self.per_second < 0.001:
            raise ValueError(f"a bucket's per_second must be at least 0.001, got {self.per_second}")

    def wire(self, key: str) -> list[Any]:
        return [self.kind, key, self.capacity, self.per_second]


@dataclass(frozen=True, slots=True)
class Leaky:
    """A smooth rate (a leaky bucket, GCRA without burst): one start every
    ``per_seconds / rate`` seconds."""

    key: LimitKey
    rate: int
    per_seconds: float
    kind = "leaky"

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_count(self.rate, "a leaky bucket's rate")
        check_duration(self.per_seconds, "a leaky bucket's per_seconds")
        if self.per_seconds / self.rate < 0.001:
            raise ValueError(
                "a leaky bucket's interval (per_seconds / rate) must be at least 0.001 s"
            )

    def wire(self, key: str) -> list[Any]:
        return [self.kind, key, self.rate, self.per_seconds]


Cost = float | Callable[..., Any]
"""A points limit's cost estimate: a number, or a function of the job's arguments."""


def check_cost(cost: object, points: int, where: str) -> float:
    """A resolved cost: a number above 0, at most ``points``; else a one-line error."""
    if isinstance(cost, bool) or not isinstance(cost, int | float):
        raise TypeError(f"{where}: a cost must be a number, got {type(cost).__name__}")
    if not math.isfinite(cost) or cost <= 0 or cost > points:
        raise ValueError(f"{where}: a cost must be above 0 and at most {points}, got {cost}")
    return float(cost)


@dataclass(frozen=True, slots=True)
class Points:
    """A budget of ``points`` per ``per_seconds`` (refilled continuously): a job
    takes its ``cost`` (an estimate) to start, and may settle its real cost from
    its handler (``await limits.settle(key, real)``)."""

    key: LimitKey
    points: int
    per_seconds: float
    cost: Cost = 1
    kind = "points"

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_count(self.points, "a points limit's points")
        check_duration(self.per_seconds, "a points limit's per_seconds")
        if self.per_seconds / self.points < 0.000001:
            raise ValueError("a points limit refills at most 1,000,000 points a second")
        if not callable(self.cost):
            check_cost(self.cost, self.points, "limits.points")

    def wire(self, key: str, cost: float = 1.0) -> list[Any]:
        return [self.kind, key, self.points, self.per_seconds, cost]


Weight = int | Callable[..., Any]
"""A fair key's weight: an int, or a function of the job's arguments giving one."""

# A fair key's largest weight: the most jobs of it taken in one turn.
MAX_WEIGHT = 1000


def check_weight(weight: object, where: str) -> int:
    """A resolved weight: an int in 1..MAX_WEIGHT; else a one-line error."""
    if isinstance(weight, bool) or not isinstance(weight, int):
        raise TypeError(f"{where}: a weight must be an int, got {type(weight).__name__}")
    if not 1 <= weight <= MAX_WEIGHT:
        raise ValueError(f"{where}: a weight must be 1-{MAX_WEIGHT}, got {weight}")
    return weight


@dataclass(frozen=True, slots=True)
class Fair:
    """The job's queue serves the keys of its fair jobs in turn (round-robin),
    ``weight`` jobs of a key per turn: a key with a long backlog never starves
    one with a few jobs. Not a cap: a fair job runs as soon as its turn comes."""

    key: LimitKey
    weight: Weight = 1
    kind = "fair"

    def __post_init__(self) -> None:
        _check_key(self.key)
        if not callable(self.weight):
            check_weight(self.weight, "limits.fair")


Limit = Concurrency | Window | Bucket | Leaky | Points | Fair
LIMIT_TYPES = (Concurrency, Window, Bucket, Leaky, Points, Fair)

# The payload field of a fair job: [key, weight] (lua_scripts/includes/fair.lua).
FAIR = "fair"


def concurrency(key: LimitKey, limit: int) -> Concurrency:
    """At most ``limit`` jobs of ``key`` (a str, or a function of the job's
    arguments giving one) run at once, across every process. A job over the
    limit is held, in order, until a running one of its key ends: never
    retried, never failed for it."""
    return Concurrency(key, limit)


def window(key: LimitKey, limit: int, per: float) -> Window:
    """At most ``limit`` jobs of ``key`` (a str, or a function of the job's
    arguments giving one) start in any ``per`` seconds (a sliding window, on
    Redis's clock). A job over it is held until the window has room again."""
    return Window(key, limit, per)


def bucket(key: LimitKey, capacity: int, per_second: float) -> Bucket:
    """A token bucket for ``key``: up to ``capacity`` jobs start at once, then
    ``per_second`` a second as it refills. A job with no token is held until one
    is in."""
    return Bucket(key, capacity, per_second)


def leaky(key: LimitKey, rate: int, per_seconds: float) -> Leaky:
    """A smooth rate for ``key``: ``rate`` starts per ``per_seconds``, evenly
    spaced (a leaky bucket, GCRA with no burst)."""
    return Leaky(key, rate, per_seconds)


def points(key: LimitKey, points: int, per_seconds: float, cost: Cost = 1) -> Points:
    """A budget of ``points`` per ``per_seconds`` for ``key``: a job takes ``cost``
    (a number, or a function of its arguments: an estimate) to start, and is
    held until the budget has that much; its handler may settle the real cost
    with ``await limits.settle(key, real)``."""
    return Points(key, points, per_seconds, cost)


def fair(key: LimitKey, weight: Weight = 1) -> Fair:
    """Serve the jobs of ``key`` (a str, or a function of the job's arguments
    giving one) in turn with the other keys of the job's queue: ``weight`` (an
    int, or a function of the arguments) jobs of it per turn."""
    return Fair(key, weight)


def check_limits(limits: object) -> None:
    """Refuse anything but a list or tuple of declared limits."""
    if limits is None:
        return
    if isinstance(limits, str | bytes) or not isinstance(limits, Sequence):
        raise TypeError(
            f"limits must be a list of limits (limits.concurrency(...)), got {limits!r}"
        )
    for limit in limits:
        if not isinstance(limit, LIMIT_TYPES):
            raise TypeError(
                "limits must hold limits "
                f"(limits.concurrency/window/bucket/leaky/points/fair(...)), got {limit!r}"
            )


def resolve_key(limit: Limit, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    if not callable(limit.key):
        return limit.key
    try:
        value = limit.key(*args, **kwargs)
    except Exception as exc:  # why: the user's function; its error, named
        raise ValueError(
            f"the limit key function {limit.key!r} failed on these arguments: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return check_key_text(value, f"the limit key function {limit.key!r}")


def _resolve_cost(limit: Points, args: Sequence[Any], kwargs: Mapping[str, Any]) -> float:
    if not callable(limit.cost):
        return float(limit.cost)
    try:
        value = limit.cost(*args, **kwargs)
    except Exception as exc:  # why: the user's function; its error, named
        raise ValueError(
            f"the cost function {limit.cost!r} failed on these arguments: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return check_cost(value, limit.points, f"the cost function {limit.cost!r}")


def _resolve_weight(limit: Fair, args: Sequence[Any], kwargs: Mapping[str, Any]) -> int:
    if not callable(limit.weight):
        return limit.weight
    try:
        value = limit.weight(*args, **kwargs)
    except Exception as exc:  # why: the user's function; its error, named
        raise ValueError(
            f"the weight function {limit.weight!r} failed on these arguments: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return check_weight(value, f"the weight function {limit.weight!r}")


def payload_fields(
    limits: Iterable[Limit], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The payload fields of a job with ``limits`` (none: {}): ``limits`` and
    ``limit_slots``, each key resolved on the job's arguments, and ``fair``
    ([key, weight]) for a fair one (the last one declared counts)."""
    wire: list[list[Any]] = []
    slots: list[str] = []
    fields: dict[str, Any] = {}
    for limit in limits:
        key = resolve_key(limit, args, kwargs)
        if isinstance(limit, Fair):
            fields[FAIR] = [key, _resolve_weight(limit, args, kwargs)]
            continue
        if isinstance(limit, Points):
            wire.append(limit.wire(key, _resolve_cost(limit, args, kwargs)))
            continue
        wire.append(limit.wire(key))
        if isinstance(limit, Concurrency) and key not in slots:
            slots.append(key)
    if not wire:
        return fields
    fields[LIMITS] = wire
    if slots:
        fields[LIMIT_SLOTS] = slots
    return fields


class BackOff(Exception):
    """Raised in a handler (a 429 with Retry-After): limit ``key`` is paused for
    ``seconds`` (no job of it starts meanwhile, in any process) and this job
    goes back held on it, first in line: no retry is counted, nothing is
    filed. ``key`` is a limit's key, as resolved (``"acct:7"``)."""

    def __init__(self, key: str, seconds: float) -> None:
        self.key = check_key_text(key, "BackOff")
        self.seconds = check_duration(seconds, "BackOff's seconds")
        super().__init__(f"back off {key!r} for {seconds:g} s")

"""``await limits.settle(key, real)``: a points limit's real cost, from inside the
handler. The job took its estimate (``limits.points(..., cost=...)``) to start;
the difference goes back to the key's budget (or is taken from it).

The worker says where (its Redis and namespace) once, in its own task before
its processors start (``set_target``): every job inherits it and pays nothing.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from cogworker_async.context import current_job
from cogworker_async.keys import Keys
from cogworker_async.store.limits import settle_points


@dataclass(frozen=True, slots=True)
class _Target:
    redis: Redis
    keys: Keys


_target: ContextVar[_Target | None] = ContextVar("cogworker_limits_target", default=None)
# (jid, the keys it settled): a second settlement of one key in one run is refused.
_settled: ContextVar[tuple[str, frozenset[str]]] = ContextVar(
    "cogworker_limits_settled", default=("", frozenset())
)


def set_target(redis: Redis, keys: Keys) -> None:
    """Where this worker's jobs settle their points (called once, by the worker)."""
    _target.set(_Target(redis, keys))


def _limit_named(payload: dict[str, Any], key: str) -> list[Any] | None:
    for limit in payload.get("limits") or ():
        if isinstance(limit, list) and len(limit) >= 5 and limit[:2] == ["points", key]:
            return limit
    return None


async def settle(key: str, real: float) -> float:
    """The real cost of this run against points limit ``key`` (its estimate went at
    the start): the difference goes back to the key's budget, or is taken from
    it. Returns the budget's points afterwards. Once per key per run;
    ``RuntimeError`` outside a worker's job or a second time, ``ValueError`` for
    a key this job has no points limit of, or a cost that is no number >= 0."""
    job = current_job()
    target = _target.get()
    if target is None:
        raise RuntimeError("limits.settle() runs inside a job a worker runs")
    limit = _limit_named(job.payload, key)
    if limit is None:
        raise ValueError(f"this job has no points limit {key!r}")
    if isinstance(real, bool) or not isinstance(real, int | float) or not real >= 0:
        raise ValueError(f"a real cost must be a number >= 0, got {real!r}")
    if not math.isfinite(real):
        raise ValueError(f"a real cost must be finite, got {real!r}")
    jid, done = _settled.get()
    if jid == job.jid and key in done:
        raise RuntimeError(f"the cost of {key!r} was settled already in this run")
    _, _, points, per_seconds, estimate = limit[:5]
    given = await settle_points(
        target.redis,
        target.keys,
        key,
        give_back=float(estimate) - float(real),
        points=int(points),
        interval_ms=float(per_seconds) * 1000 / int(points),
    )
    _settled.set((job.jid, (done if jid == job.jid else frozenset()) | {key}))
    return given

"""Rate and concurrency limits (``@job(limits=[limits.concurrency("stripe", 5)])``).

A limit is checked where its job is taken, in the same atomic step as the
take; a job over its limit is held (parked per key, in order) and let back in
when a slot frees: never retried, never failed for being limited. See
``docs/guides/limits.md``.
"""

from cogworker_async.limits.declarations import (
    FAIR,
    LIMIT_SLOTS,
    LIMITS,
    BackOff,
    Bucket,
    Concurrency,
    Fair,
    Leaky,
    Limit,
    LimitKey,
    Points,
    Window,
    bucket,
    check_limits,
    concurrency,
    fair,
    leaky,
    payload_fields,
    points,
    window,
)
from cogworker_async.limits.settle import set_target, settle

__all__ = [
    "FAIR",
    "LIMITS",
    "LIMIT_SLOTS",
    "BackOff",
    "Bucket",
    "Concurrency",
    "Fair",
    "Leaky",
    "Limit",
    "LimitKey",
    "Points",
    "Window",
    "bucket",
    "check_limits",
    "concurrency",
    "fair",
    "leaky",
    "payload_fields",
    "points",
    "set_target",
    "settle",
    "window",
]

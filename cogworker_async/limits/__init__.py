"""Rate and concurrency limits (``@job(limits=[limits.concurrency("stripe", 5)])``).

A limit is checked where its job is taken, in the same atomic step as the
take; a job over its limit is held (parked per key, in order) and let back in
when a slot frees: never retried, never failed for being limited. See
``docs/guides/limits.md``.
"""

from cogworker_async.limits.declarations import (
    LIMIT_SLOTS,
    LIMITS,
    BackOff,
    Concurrency,
    Limit,
    LimitKey,
    Window,
    check_limits,
    concurrency,
    payload_fields,
    window,
)

__all__ = [
    "LIMITS",
    "LIMIT_SLOTS",
    "BackOff",
    "Concurrency",
    "Limit",
    "LimitKey",
    "Window",
    "check_limits",
    "concurrency",
    "payload_fields",
    "window",
]

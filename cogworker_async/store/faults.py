"""Is this an outage? A wrong-typed key? And the once-per-episode failure log.

An outage ("try again soon") is decided by one function from an explicit list:
redis-py reports some of them (``LOADING``, ``READONLY``, ``MASTERDOWN``, ...)
as plain ``ResponseError``s, so no base-class shortcut would do.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from redis import exceptions as rexc

_OUTAGE_TYPES: tuple[type[BaseException], ...] = (
    rexc.ConnectionError,
    rexc.TimeoutError,
    rexc.BusyLoadingError,
    rexc.ReadOnlyError,
    rexc.ClusterDownError,
    rexc.TryAgainError,
    rexc.MasterDownError,
    TimeoutError,
    ConnectionError,
    OSError,
)

# Not outages: MOVED and ASK. The cluster client follows them itself (a slot
# migration is routine); one that reaches us means a plain client was pointed
# at a cluster node, a configuration mistake that waiting will not fix.
_OUTAGE_PREFIXES = ("LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "BUSY ")


# Redis before 7.0 wraps an error raised by a command inside a script:
# "Error running script (call to f_<sha>): @user_script:26: WRONGTYPE ...". One the
# script runner raises itself (a write on a replica, say) is wrapped twice:
# "... @user_script:33: @user_script: 33: -READONLY You can't write against a read
# only replica." (as Redis 6.2.14 sends it). Redis 7 and Valkey pass the
# command's own error through.
_SCRIPT_WRAPPER = re.compile(
    r"^(?:ERR )?Error running script \(call to f_[0-9a-f]+\): @\w+:\d+: (?:@\w+: \d+: -)?"
)
# redis-py prefixes an error raised out of a pipeline with the command it came from.
_PIPELINE_WRAPPER = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)


def reply_text(exc: BaseException) -> str:
    """The error reply as the command gave it, without redis-py's pipeline prefix or
    Redis 6's script wrapper."""
    return _SCRIPT_WRAPPER.sub("", _PIPELINE_WRAPPER.sub("", str(exc), count=1), count=1)


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` means Redis is (briefly) unreachable: retry soon, don't report a bug."""
    if isinstance(exc, _OUTAGE_TYPES):
        return True
    if isinstance(exc, rexc.ResponseError):
        return reply_text(exc).startswith(_OUTAGE_PREFIXES)
    return False


def is_wrong_type(exc: BaseException) -> bool:
    """True when Redis refused a command because a key of ours has the wrong type.

    The key guard can fix that (it moves the key aside); nothing else can.
    """
    return isinstance(exc, rexc.ResponseError) and reply_text(exc).startswith("WRONGTYPE")


# What a duty logs when it loses Redis and when it has it back (metrics.py's
# OutageWatcher counts outages from these very format strings).
OUTAGE_STARTED = "%s: Redis unavailable (%s: %s)"
OUTAGE_ENDED = "%s: Redis is back, recovered after %.1f s"
FAILING = "%s: failing (%s: %s); retried, logged again when it recovers"
BUG = "%s failed (a bug: please report it); retried, logged again when it recovers"
RECOVERED = "%s: recovered after %d failure(s) in %.1f s"


class FailureLog:
    """One duty's repeated failures, logged once per episode, never once per try.

    An episode runs from a duty's first failure to its next success. Within
    one, each kind of failure is logged once, when first seen: an outage
    (warning), any other Redis error reply such as ``WRONGTYPE``, ``OOM`` or
    ``NOPERM`` (error, no traceback: it is Redis's answer, not our bug), and a
    Python exception of ours (error with its traceback: "a bug: please report
    it"). The success that ends it says how many tries failed and for how long.
    A ``WRONGTYPE`` reply also calls ``on_wrong_type`` on every failure (the
    key guard's wake-up, rate-limited there), so the key is moved aside at
    once rather than at the next periodic check.

    Not thread-safe: one instance per loop or thread (the heartbeat has its own).
    """

    __slots__ = ("_count", "_logged", "_on_wrong_type", "_since", "duty", "logger")

    def __init__(
        self,
        duty: str,
        logger: logging.Logger,
        *,
        on_wrong_type: Callable[[], None] | None = None,
    ) -> None:
        self.duty = duty
        self.logger = logger
        self._on_wrong_type = on_wrong_type
        self._since: float | None = None
        self._count = 0
        self._logged: set[str] = set()

    @property
    def down(self) -> bool:
        """An outage was reported and no success has been seen since."""
        return "outage" in self._logged

    @property
    def failing(self) -> bool:
        """A failure was seen and no success since."""
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        if self._since is None:
            self._since = time.monotonic()
            self._count = 0
        self._count += 1
        if is_outage(exc):
            kind = "outage"
        elif isinstance(exc, rexc.RedisError):
            kind = "reply"
            if self._on_wrong_type is not None and is_wrong_type(exc):
                self._on_wrong_type()
        else:
            kind = "bug"
        if kind in self._logged:
            return
        self._logged.add(kind)
        if kind == "outage":
            self.logger.warning(OUTAGE_STARTED, self.duty, type(exc).__name__, exc)
        elif kind == "reply":
            self.logger.error(FAILING, self.duty, type(exc).__name__, exc)
        else:
            self.logger.error(BUG, self.duty, exc_info=exc)

    def succeeded(self, started: float | None = None) -> None:
        """A call succeeded. ``started`` (``time.monotonic()`` when it was sent):
        a call sent before the episode began and answered just before the link
        dropped says nothing about Redis being back."""
        if self._since is None:
            return  # the hot path: nothing to report
        if started is not None and started < self._since:
            return
        took = time.monotonic() - self._since
        logged, count = self._logged, self._count
        self._since, self._count, self._logged = None, 0, set()
        if "outage" in logged:
            self.logger.warning(OUTAGE_ENDED, self.duty, took)
        if logged - {"outage"}:
            self.logger.warning(RECOVERED, self.duty, count, took)


OutageLog = FailureLog
"""The name this had when it logged outages only (kept for callers that use it)."""

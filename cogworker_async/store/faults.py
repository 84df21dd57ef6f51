"""Is this an outage? And the once-per-outage log.

An outage ("try again soon") is decided by one function from an explicit list:
redis-py reports some of them (``LOADING``, ``READONLY``, ``MASTERDOWN``, ...)
as plain ``ResponseError``s, so no base-class shortcut would do.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from redis import exceptions as rexc

_OUTAGE_TYPES: tuple[type[BaseException], ...] = (
    rexc.ConnectionError,
    rexc.TimeoutError,
    rexc.BusyLoadingError,
    rexc.ReadOnlyError,
    rexc.ClusterDownError,
    rexc.TryAgainError,
    rexc.MasterDownError,
    rexc.AskError,
    rexc.MovedError,
    TimeoutError,
    ConnectionError,
    OSError,
)

_OUTAGE_PREFIXES = ("LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "BUSY ")


def is_outage(exc: BaseException) -> bool:
    """True when ``exc`` means Redis is (briefly) unreachable: retry soon, don't report a bug."""
    if isinstance(exc, _OUTAGE_TYPES):
        return True
    if isinstance(exc, rexc.ResponseError):
        message = str(exc)
        return message.startswith(_OUTAGE_PREFIXES)
    return False


@dataclass
class OutageLog:
    """Logs an outage once when it starts and once when it ends, per duty."""

    duty: str
    logger: logging.Logger
    _since: float | None = field(default=None, init=False)

    @property
    def down(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        if self._since is None:
            self._since = time.monotonic()
            self.logger.warning(
                "%s: Redis unavailable (%s: %s)", self.duty, type(exc).__name__, exc
            )

    def succeeded(self, started: float | None = None) -> None:
        """A call succeeded. ``started`` (``time.monotonic()`` when it was sent):
        a call sent before the outage began and answered just before the link
        dropped says nothing about Redis being back."""
        if started is not None and self._since is not None and started < self._since:
            return
        if self._since is not None:
            took = time.monotonic() - self._since
            self._since = None
            self.logger.warning("%s: Redis is back, recovered after %.1f s", self.duty, took)

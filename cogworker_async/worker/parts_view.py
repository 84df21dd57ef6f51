"""A worker's parts seen from outside (tests, embedders, the CLI): each one, or None
before the worker has started (and where ``Parts`` says it may be absent)."""

from __future__ import annotations

from cogworker_async.periodic.ticker import Ticker
from cogworker_async.unique.releases import DeferredReleases
from cogworker_async.worker.abort_listener import AbortWatcher
from cogworker_async.worker.assembly import Parts
from cogworker_async.worker.fetcher import Fetcher
from cogworker_async.worker.heartbeat import Heartbeat
from cogworker_async.worker.keyguard import KeyGuard
from cogworker_async.worker.processor import Processors
from cogworker_async.worker.reconcile import Reconciler
from cogworker_async.worker.recovery import Recovery
from cogworker_async.worker.settlement import Settler


class PartsView:
    """``worker.fetcher``, ``worker.processors``...: read-only, from ``parts``."""

    parts: Parts | None

    @property
    def processors(self) -> Processors | None:
        return None if self.parts is None else self.parts.processors

    @property
    def fetcher(self) -> Fetcher | None:
        return None if self.parts is None else self.parts.fetcher

    @property
    def settler(self) -> Settler | None:
        return None if self.parts is None else self.parts.settler

    @property
    def heartbeat(self) -> Heartbeat | None:
        return None if self.parts is None else self.parts.heartbeat

    @property
    def releases(self) -> DeferredReleases | None:
        return None if self.parts is None else self.parts.releases

    @property
    def recovery(self) -> Recovery | None:
        """None before start-up and in basic fetch mode (nothing to recover)."""
        return None if self.parts is None else self.parts.recovery

    @property
    def reconciler(self) -> Reconciler | None:
        return None if self.parts is None else self.parts.reconciler

    @property
    def key_guard(self) -> KeyGuard | None:
        return None if self.parts is None else self.parts.key_guard

    @property
    def ticker(self) -> Ticker | None:
        """None before start-up and without periodic entries."""
        return None if self.parts is None else self.parts.ticker

    @property
    def aborts(self) -> AbortWatcher | None:
        return None if self.parts is None else self.parts.aborts

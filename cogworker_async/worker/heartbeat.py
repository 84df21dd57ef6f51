"""The heartbeat: this process says it is alive, independently of its event loop.

It runs in its own thread with its own blocking connection, so a handler that
hogs the event loop (a CPU-bound ``async def``) cannot make a live process
look dead and have its jobs recovered while they still run. One
``heartbeat.lua`` call writes the presence key, the last-beat stamp on Redis's
clock, the in-progress registry entry, the live-queue stamps, the workers
hash and the process set.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from cogworker_async._version import __version__
from cogworker_async.keys import Keys
from cogworker_async.settings import Settings
from cogworker_async.store import presence
from cogworker_async.store.connection import connect_sync
from cogworker_async.store.faults import FailureLog

# What the presence info reports as "version": the package's one version.
VERSION = __version__
# The shortest gap between two beats, as a fraction of ``heartbeat_interval``,
# when job starts ask for beats early (``Heartbeat.soon``).
EARLY_BEAT_SPACING = 0.2


def rss_bytes() -> int | None:
    """This process's resident memory (Linux), for `processes`; None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class Heartbeat:
    def __init__(
        self,
        settings: Settings,
        keys: Keys,
        *,
        identity: str,
        queues: list[str],
        reliable: Callable[[], bool],
        busy: Callable[[], dict[str, Any]],
        logger: logging.Logger,
        on_signal: Callable[[str], None] = lambda _name: None,
        on_wrong_type: Callable[[], None] | None = None,
        jobs: Sequence[str] = (),
        on_beat: Callable[[float], None] = lambda _sent: None,
    ) -> None:
        self._settings = settings
        self._keys = keys
        self.identity = identity
        self._queues = queues
        # The names of the jobs this process runs, in its presence info: a
        # client enqueueing by name warns when no live process knows the name.
        # Names only, to keep every beat small.
        self._jobs = sorted(jobs)
        self._reliable = reliable
        self._busy = busy
        # Told when each beat that landed was sent (monotonic), from this thread.
        self._on_beat = on_beat
        self._on_signal = on_signal
        self.quiet = False
        self._log = logger
        self._stop = threading.Event()
        # Set to ask for an early beat (a job started) or to end the loop (stop).
        self._wake = threading.Event()
        # True from the first start after a beat until the next beat: the
        # processors' cost of asking is this one test per job.
        self._early_asked = False
        self._thread: threading.Thread | None = None
        self._redis = connect_sync(
            settings,
            # Bounded by the beat interval: a beat stuck on a dead link or a
            # slow connect must not keep this process silent long after Redis
            # answers again (recovery gives it orphan_threshold, no more).
            socket_timeout=min(settings.socket_timeout, settings.heartbeat_interval * 2),
            socket_connect_timeout=min(
                settings.socket_timeout, 5.0, max(1.0, settings.heartbeat_interval * 2)
            ),
        )
        self.started_at = time.time()
        self.last_stamp: float | None = None
        # on_wrong_type is called from this thread: it must be thread-safe.
        self._failures = FailureLog("Heartbeat", logger, on_wrong_type=on_wrong_type)

    def info(self) -> bytes:
        busy = self._busy()
        return orjson.dumps(
            {
                "identity": self.identity,
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "queues": self._queues,
                "concurrency": self._settings.concurrency,
                "started_at": self.started_at,
                "busy": len(busy),
                "rss": rss_bytes(),
                "quiet": self.quiet,
                "version": VERSION,
                "jobs": self._jobs,
            }
        )

    def beat_once(self) -> float:
        """One beat (blocking); raises on a Redis error."""
        sent = time.monotonic()
        workers = self._busy()
        beat = {
            "identity": self.identity,
            "info": self.info().decode(),
            "ttl_ms": int(self._settings.heartbeat_ttl * 1000),
            "clock": time.time(),
            "queues": self._queues,
            "workers": workers,
            "reliable": self._reliable(),
        }
        reply = presence.beat(self._redis, self._keys, self.identity, orjson.dumps(beat))
        stamp = float(reply[0])
        self.last_stamp = stamp
        self._on_beat(sent)
        for signal in reply[1:]:
            name = signal.decode() if isinstance(signal, bytes) else str(signal)
            self._log.warning("received remote signal %r", name)
            self._on_signal(name)
        return stamp

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"cogworker-heartbeat-{self.identity}", daemon=True
        )
        self._thread.start()

    def soon(self) -> None:
        """Ask for a beat before the interval is out: a job started, and the Busy
        page and ``api.running`` should show it within a fraction of the interval
        rather than up to a whole one later. Cheap enough to call on every start."""
        if not self._early_asked:
            self._early_asked = True
            self._wake.set()

    def _loop(self) -> None:
        interval = self._settings.heartbeat_interval
        # Early beats are spaced: a busy process beats at most 1/EARLY_BEAT_SPACING
        # times an interval, however many jobs it starts.
        spacing = interval * EARLY_BEAT_SPACING
        last = time.monotonic()
        while not self._stop.is_set():
            if self._wake.is_set():
                delay = last + spacing - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    return
            else:
                self._wake.wait(last + interval - time.monotonic())
                if self._wake.is_set():
                    continue  # asked early (or stopped): wait out the spacing first
            if self._stop.is_set():
                return
            self._wake.clear()
            self._early_asked = False
            last = time.monotonic()
            try:
                self.beat_once()
            except Exception as exc:  # noqa: BLE001 - a beat failing must not end the beating
                self._failures.failed(exc)  # once per episode; WRONGTYPE wakes the key guard
            else:
                self._failures.succeeded()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self._settings.socket_timeout + 1)

    def deregister(self) -> bool:
        """Remove this process's liveness keys; the registries too if its list is empty.

        One script (``deregister.lua``), so a job landing on the list meanwhile
        keeps the list findable by orphan recovery. True if it left them all.
        """
        return presence.deregister(self._redis, self._keys, self.identity)

    def close(self) -> None:
        self._redis.close()

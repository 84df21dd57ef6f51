"""A worker's lifespan: what its handlers share, opened before the first job, closed after the last.

A lifespan is an async context manager factory called with the worker, as in
Starlette::

    @contextlib.asynccontextmanager
    async def lifespan(worker: Worker) -> AsyncIterator[State]:
        pool = await open_pool()
        yield State(pool=pool)
        await pool.close()

The worker enters it after its first beat, before any processor fetches, and
exits it after the shutdown is complete (the last job settled, this process's
list requeued): whatever ended the run, a graceful stop, SIGTERM or an error,
the code after ``yield`` runs (it is exited as a normal exit, so a lifespan
needs no ``try``/``finally`` for it). A lifespan that raises before it yields
stops the worker before it takes any job (``LifespanError``).

What it yields is set once in the worker's task, before the processors start:
handlers read it with ``lifespan_state(State)`` or ``current_job().state`` at
no cost to a job that does not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from contextvars import Token
from typing import Any, Generic, TypeVar

import anyio

from cogworker_async.context import reset_lifespan_state, set_lifespan_state
from cogworker_async.errors import LifespanError

Owner = TypeVar("Owner")

# Generic in what it is called with: the worker's module spells it ``Lifespan[Worker]``,
# so this module needs nothing of the worker (which imports it).
Lifespan = Callable[[Owner], AbstractAsyncContextManager[Any]]


def lifespan_name(factory: object) -> str:
    """``module:qualname`` of a lifespan, as ``--lifespan`` spells it."""
    module = getattr(factory, "__module__", None) or "?"
    name = getattr(factory, "__qualname__", None) or repr(factory)
    return f"{module}:{name}"


class LifespanRunner(Generic[Owner]):
    """Enters one lifespan for one run of a worker, and exits it once."""

    def __init__(self, factory: Lifespan[Owner], worker: Owner, logger: logging.Logger) -> None:
        self._factory = factory
        self._worker = worker
        self._log = logger
        self.name = lifespan_name(factory)
        self._manager: AbstractAsyncContextManager[Any] | None = None
        self._token: Token[Any] | None = None

    async def enter(self) -> None:
        """Open it and make what it yields the handlers' state; ``LifespanError`` if it fails.

        Cancellation (a ``stop()`` during a slow start-up) passes through as itself.
        """
        try:
            manager = self._factory(self._worker)
            state = await manager.__aenter__()
        except Exception as exc:
            message = f"lifespan {self.name} failed at start-up: {type(exc).__name__}: {exc}"
            # One line for the log; the traceback only when debugging.
            self._log.error("%s; the worker stops before taking any job", message)
            self._log.debug("lifespan %s start-up traceback", self.name, exc_info=exc)
            raise LifespanError(message) from exc
        self._manager = manager
        self._token = set_lifespan_state(state)

    async def exit(self) -> None:
        """Close it, if it was opened; shielded, so a cancelled run still closes it.

        An error while closing is logged, not raised: the jobs are all settled
        by now, and the run's own outcome stays what it was.
        """
        manager, self._manager = self._manager, None
        if manager is None:
            return
        try:
            with anyio.CancelScope(shield=True):
                await manager.__aexit__(None, None, None)
        except Exception:  # noqa: BLE001 - user code; the run's outcome stays its own
            self._log.exception("lifespan %s failed while closing", self.name)
        finally:
            if self._token is not None:
                reset_lifespan_state(self._token)
                self._token = None

"""The exception tree.

::

    CogworkerError
    ├── ConfigurationError      bad settings, module or queue spec given by the user
    ├── ScriptError             a Lua script could not be loaded (missing/cyclic include)
    ├── LifespanError           the worker's lifespan failed at start-up (no job was taken)
    ├── ResultError             waiting for a job's result (``Client.result``) did not give one
    │   ├── JobFailed           the job failed terminally (dead or discarded): its class, message
    │   │   └── JobAborted      the job was aborted (``Client.abort``)
    │   ├── ResultTimeout       no result within the timeout
    │   │   └── ResultNotKept   the job keeps no result: none will come, said at once
    │   ├── ResultExpired       the job finished but its result's ``keep_result`` ran out
    │   └── ResultCorrupt       the result key holds what no worker wrote (named, kept)
    ├── StatusCorrupt           a status hash holds a field we cannot read (named, kept)
    ├── BatchGone               a batch is gone or over: no member can join it
    └── JobError                recorded on a job as its ``error_class``
        ├── UnparseableJob      payload is not a JSON object with a queue
        ├── UnknownJob          no handler registered under the job's ``class``
        ├── JobTimeout          the handler ran past its ``timeout``
        ├── ResultNotJSON       a ``keep_result`` job returned a value that is not JSON
        ├── ProcessDied         its process died while running it too often
        └── DependencyFailed    a flow's step before it did not succeed (it never ran)

Mistakes in arguments (a non-JSON argument at enqueue) stay builtins:
``TypeError`` and ``ValueError``.
"""

from __future__ import annotations


class CogworkerError(Exception):
    """Base of every exception this library raises on its own behalf."""


class ConfigurationError(CogworkerError):
    """The user's configuration cannot work (bad module, queue spec, Redis URL)."""


class ScriptError(CogworkerError):
    """A Lua script could not be assembled (missing or cyclic ``--- @include``)."""


class LifespanError(CogworkerError):
    """The worker's lifespan raised before it yielded: the worker stopped before any job."""


class JobError(CogworkerError):
    """A failure the library itself records on a job; the class name is its ``error_class``."""


class UnparseableJob(JobError):
    """The payload is not a JSON object with a queue."""


class UnknownJob(JobError):
    """No handler is registered under the job's name."""


class JobTimeout(JobError):
    """The handler ran past the job's ``timeout``."""


class ProcessDied(JobError):
    """Its process died while running it more than ``max_orphanings`` times."""


class ResultNotJSON(JobError):
    """A job that keeps its result returned a value that is not JSON."""


class ResultError(CogworkerError):
    """Waiting for a job's result did not give one."""


class JobFailed(ResultError):
    """The job failed terminally (dead, or discarded): ``error_class``, ``error_message``."""

    def __init__(self, jid: str, error_class: str, error_message: str) -> None:
        super().__init__(f"job {jid} failed: {error_class}: {error_message}")
        self.jid = jid
        self.error_class = error_class
        self.error_message = error_message


class JobAborted(JobFailed):
    """The job was aborted (``Client.abort``): removed before it ran, or cancelled."""


class ResultTimeout(ResultError, TimeoutError):
    """No result within the timeout (the job may still be waiting or running)."""


class ResultNotKept(ResultTimeout):
    """The job keeps no result (no ``keep_result`` on it, its ``.options`` or the
    setting), so none will ever come: said at once instead of after the timeout.

    A ``ResultTimeout``, what such a wait used to end in, so code that catches
    that still does; the message says how to ask for a result.
    """


class ResultExpired(ResultError):
    """The job finished, but its result is no longer kept (``keep_result`` ran out)."""


class ResultCorrupt(ResultError):
    """The job's result key holds what no worker wrote (not our JSON envelope, or
    the wrong type): the key is named and left as found, for a human."""


class BatchGone(CogworkerError):
    """The batch does not exist, or is over: no member (nor child batch) can join it."""


class StatusCorrupt(CogworkerError):
    """The job's status hash holds a field we cannot read (or is the wrong type):
    the key and field are named, the key left as found."""


class DependencyFailed(JobError):
    """A flow's step before this one did not succeed: this one never ran (``if_failed="fail"``);
    or a job of ``after=[...]`` did not (an edge's ``if_failed="fail"``, the default)."""


class DependencyDropped(JobError):
    """A job of ``after=[...]`` did not succeed and the edge said ``if_failed="drop"``:
    this one ended aborted, never run."""


class PrerequisiteUnknown(CogworkerError, ValueError):
    """``after=[...]`` names a job nothing in Redis tells of (no status, no kept result,
    in no queue or set): whether it succeeded is not known, so nothing was enqueued."""

"""The exception tree.

::

    CogworkerError
    ├── ConfigurationError      bad settings, module or queue spec given by the user
    ├── ScriptError             a Lua script could not be loaded (missing/cyclic include)
    ├── LifespanError           the worker's lifespan failed at start-up (no job was taken)
    └── JobError                recorded on a job as its ``error_class``
        ├── UnparseableJob      payload is not a JSON object with a queue
        ├── UnknownJob          no handler registered under the job's ``class``
        ├── JobTimeout          the handler ran past its ``timeout``
        └── ProcessDied         its process died while running it too often

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

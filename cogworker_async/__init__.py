"""cogworker_async: an asyncio-native, Redis-backed background-job library.

A job that was enqueued is never lost, a job that finished is never run again
because of an infrastructure fault, and a job that kills its own process is
stopped after a bounded number of tries.
"""

from cogworker_async import limits
from cogworker_async._version import __version__
from cogworker_async.client import AbortOutcome, Client, JobHandle
from cogworker_async.client.tracking import JobStatus
from cogworker_async.context import JobContext, current_job, lifespan_state
from cogworker_async.errors import (
    BatchGone,
    CogworkerError,
    ConfigurationError,
    DependencyDropped,
    DependencyFailed,
    JobAborted,
    JobError,
    JobFailed,
    JobTimeout,
    LifespanError,
    PrerequisiteUnknown,
    ProcessDied,
    ResultExpired,
    ResultNotJSON,
    ResultNotKept,
    ResultTimeout,
    UnknownJob,
    UnparseableJob,
)
from cogworker_async.jobs import BoundJob, JobFunction, job

# The decorator object, not the subpackage of the same name (which it stands
# for: see periodic/decorator.py): ``from cogworker_async import periodic``.
from cogworker_async.periodic import periodic
from cogworker_async.settings import Settings
from cogworker_async.worker.worker import Worker
from cogworker_async.workflows import batch_results, chain, chord, group, step

__all__ = [
    "AbortOutcome",
    "BatchGone",
    "BoundJob",
    "Client",
    "CogworkerError",
    "ConfigurationError",
    "DependencyDropped",
    "DependencyFailed",
    "JobAborted",
    "JobContext",
    "JobError",
    "JobFailed",
    "JobFunction",
    "JobHandle",
    "JobStatus",
    "JobTimeout",
    "LifespanError",
    "PrerequisiteUnknown",
    "ProcessDied",
    "ResultExpired",
    "ResultNotJSON",
    "ResultNotKept",
    "ResultTimeout",
    "Settings",
    "UnknownJob",
    "UnparseableJob",
    "Worker",
    "__version__",
    "batch_results",
    "chain",
    "chord",
    "current_job",
    "group",
    "job",
    "lifespan_state",
    "limits",
    "periodic",
    "step",
]

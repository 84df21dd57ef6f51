"""The rules a failure is filed by: how many retries a job gets, its next
``retry_count``, the error's class name, and why its arguments misfit."""

from __future__ import annotations

from typing import Any

from cogworker_async.jobs import JobFunction, RetryOption
from cogworker_async.settings import Settings


def retry_limit(
    job: dict[str, Any], settings: Settings, registered: RetryOption | None = None
) -> int | None:
    """How many retries this job gets; None means "discard on failure" (``retry: False``).

    The payload's own ``retry`` first; a payload without one (enqueued by name
    from a process that does not know the job, or pushed by hand) takes the
    registered job's (``@job(retry=...)``), then ``max_retries``.
    """
    option = job.get("retry")
    if option is None:
        option = registered
    if option is False:
        return None
    if option is True or option is None:
        return settings.max_retries
    if isinstance(option, int) and option >= 0:
        return option
    return settings.max_retries


def arguments_misfit(
    job: dict[str, Any], exc: BaseException, function: JobFunction[Any, Any] | None
) -> str | None:
    """Why the job's arguments do not fit its handler, when that is its ``TypeError``."""
    if function is None or not isinstance(exc, TypeError):
        return None
    args, kwargs = job.get("args") or (), job.get("kwargs") or {}
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        return None
    problem = function.call_problem(args, kwargs)
    return (
        None if problem is None else f"job {function.name!r} cannot take its arguments: {problem}"
    )


def error_class_name(exc: BaseException) -> str:
    return type(exc).__name__


def next_retry_count(job: dict[str, Any]) -> int:
    """The ``retry_count`` a failure files the job with: Sidekiq's index of the failure
    (0 for the first), what the retry and dead entries and the UI show."""
    count = job.get("retry_count")
    return count + 1 if isinstance(count, int) and not isinstance(count, bool) else 0

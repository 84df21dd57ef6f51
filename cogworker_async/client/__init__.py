"""The producer's side: putting jobs in and asking about them.

``client`` (``Client``: enqueue, delays, ``enqueue_many``, ``status``,
``result``, ``abort``), ``aborting`` (abort: remove a waiting job, or ask a
running one's process to cancel it), ``by_name`` (enqueue by a job's name and the check of the live
processes that would run it), ``enqueue_many`` (a bulk batch sent one
pipeline per chunk) and ``tracking`` (opt-in status and kept results: the
keys, the best-effort writer, and waiting for a result).
"""

from cogworker_async.client.aborting import AbortOutcome
from cogworker_async.client.by_name import EnqueuedByName
from cogworker_async.client.client import Client, JobHandle

__all__ = ["AbortOutcome", "Client", "EnqueuedByName", "JobHandle"]

"""Job status, where the client's callers have always found it: the writer
(``StatusWriter``, ``store/status_writes.py``) and the reader (``read_status``,
``store/status.py``) both live in the store, below the client and the worker
that write status."""

from __future__ import annotations

from cogworker_async.lifecycle import STATUS_STRINGS
from cogworker_async.store.status import (
    JobStatus,
    Progress,
    progress_fields,
    read_status,
)
from cogworker_async.store.status_writes import (
    MAX_STATUS_WRITES,
    STATUS_WRITE_TIMEOUT,
    StatusWriter,
)

__all__ = [
    "MAX_STATUS_WRITES",
    "STATES",
    "STATUS_WRITE_TIMEOUT",
    "JobStatus",
    "Progress",
    "StatusWriter",
    "progress_fields",
    "read_status",
]

# The status strings (wire contract), from the lifecycle table.
STATES = STATUS_STRINGS

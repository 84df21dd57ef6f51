"""Read and admin views over the wire contract: queues, sets, processes, stats.

The CLI and the web UI are thin layers over these functions. None of them
raises on bad data: a key of the wrong type reads as empty and is named in a
warning (the worker's key guard moves it to ``<ns>:quarantine:...``); an entry
that is not a runnable job is listed with ``job=None`` or a ``problem`` saying
why, and the moving actions leave it where it is. Connection errors propagate:
the caller decides what an outage means.

Moving an entry of the retry, dead or schedule set onto its queue is one Lua
call per entry (``enqueue_entry.lua``): it is never both queued and still in
the set, and two operators retrying it at once move it once.

Layout: ``overview`` (queues, stats, pause/resume/clear), ``history`` (the
metrics history per minute and per day), ``sets`` (the
retry, dead and schedule sets), ``running`` (processes, what they run,
signals), ``quarantine`` (keys the key guard moved aside), ``periodic``
(periodic entries: list, run now, pause/resume), ``locks`` (unique-job locks: list,
delete, delete the orphaned), ``limits`` (rate and concurrency limits: list,
set, clear, delete held jobs), ``batches`` (batches: recent, one in full); ``_common`` holds
the shared helpers. Import from here: the submodules are not the interface.
"""

from cogworker_async.api.batches import list_batches, show_batch
from cogworker_async.api.history import (
    MAX_DAYS,
    MAX_MINUTES,
    DayPoint,
    History,
    JobMinute,
    JobSummary,
    MinutePoint,
    history,
)
from cogworker_async.api.limits import (
    FairLine,
    LimitInfo,
    clear_held,
    clear_limit,
    list_fair,
    list_limits,
    set_limit,
)
from cogworker_async.api.locks import (
    LockInfo,
    LockPage,
    delete_lock,
    delete_orphaned,
    list_locks,
    list_locks_page,
)
from cogworker_async.api.lookup import (
    Found,
    Lookup,
    check_jid,
    kept_result,
    locate,
    progress_of,
)
from cogworker_async.api.overview import (
    RECOVERY_COUNTERS,
    QueueInfo,
    Stats,
    UnknownQueueError,
    clear_queue,
    pause,
    queue_names,
    queues,
    resume,
    stats,
)
from cogworker_async.api.periodic import (
    PeriodicInfo,
    pause_periodic,
    periodic_entries,
    resume_periodic,
    run_periodic_now,
)
from cogworker_async.api.quarantine import QuarantinedKey, quarantine_list
from cogworker_async.api.running import (
    SIGNAL_TTL,
    SIGNALS,
    BusyJob,
    ProcessInfo,
    busy,
    human_size,
    processes,
    send_signal,
)
from cogworker_async.api.sets import (
    DIGEST_PREFIX,
    SET_NAMES,
    Entry,
    SetName,
    delete,
    delete_all,
    digest,
    find_entries,
    list_entries,
    parse_entry,
    retry_all,
    retry_now,
    set_key,
)

__all__ = [
    "DIGEST_PREFIX",
    "MAX_DAYS",
    "MAX_MINUTES",
    "RECOVERY_COUNTERS",
    "SET_NAMES",
    "SIGNALS",
    "SIGNAL_TTL",
    "BusyJob",
    "DayPoint",
    "Entry",
    "FairLine",
    "Found",
    "History",
    "JobMinute",
    "JobSummary",
    "LimitInfo",
    "LockInfo",
    "LockPage",
    "Lookup",
    "MinutePoint",
    "PeriodicInfo",
    "ProcessInfo",
    "QuarantinedKey",
    "QueueInfo",
    "SetName",
    "Stats",
    "UnknownQueueError",
    "busy",
    "check_jid",
    "clear_held",
    "clear_limit",
    "clear_queue",
    "delete",
    "delete_all",
    "delete_lock",
    "delete_orphaned",
    "digest",
    "find_entries",
    "history",
    "human_size",
    "kept_result",
    "list_batches",
    "list_entries",
    "list_fair",
    "list_limits",
    "list_locks",
    "list_locks_page",
    "locate",
    "parse_entry",
    "pause",
    "pause_periodic",
    "periodic_entries",
    "processes",
    "progress_of",
    "quarantine_list",
    "queue_names",
    "queues",
    "resume",
    "resume_periodic",
    "retry_all",
    "retry_now",
    "run_periodic_now",
    "send_signal",
    "set_key",
    "set_limit",
    "show_batch",
    "stats",
]

"""Every Redis key name, built from the namespace. No key literal lives elsewhere.

The namespace may carry a Redis Cluster hash tag (``{cogworker}``): every key
then hashes to one slot, which keeps every Lua script single-slot.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names for one namespace (see SPEC §2 for what each holds)."""

    ns: str

    # --- queues -----------------------------------------------------------
    def queue(self, name: str) -> str:
        return f"{self.ns}:queue:{name}"

    @property
    def queue_prefix(self) -> str:
        return f"{self.ns}:queue:"

    @property
    def queues(self) -> str:
        return f"{self.ns}:queues"

    @property
    def paused(self) -> str:
        return f"{self.ns}:paused"

    def wakeup(self, name: str) -> str:
        """Marker an idle worker blocks on (BZPOPMIN); producers ZADD it after LPUSH."""
        return f"{self.ns}:wakeup:{name}"

    @property
    def wakeup_prefix(self) -> str:
        return f"{self.ns}:wakeup:"

    # --- sorted sets ---------------------------------------------------------
    @property
    def schedule(self) -> str:
        return f"{self.ns}:schedule"

    @property
    def schedule_wakeup(self) -> str:
        """The scheduled poller's wake-up marker: a sorted set holding one member, scored
        with the earliest due time a producer left there (``ZADD LT``).

        Producers touch it only when their entry is the earliest of its set;
        pollers block on it (BZPOPMIN). Not ``wakeup:<name>``: a queue may be
        called "schedule".
        """
        return f"{self.ns}:schedule:wakeup"

    @property
    def retry(self) -> str:
        return f"{self.ns}:retry"

    @property
    def dead(self) -> str:
        return f"{self.ns}:dead"

    # --- in-progress and liveness -----------------------------------------
    def in_progress(self, identity: str) -> str:
        return f"{self.ns}:in_progress:{identity}"

    @property
    def in_progress_prefix(self) -> str:
        return f"{self.ns}:in_progress:"

    def given_back(self, call: str) -> str:
        """One basic-fetch give back's once-marker (a string, kept a day; ``call``: the
        giving process's identity and its count of give backs): a repeat of the call
        after a lost reply finds it and pushes nothing twice."""
        return f"{self.ns}:given_back:{call}"

    @property
    def in_progress_identities(self) -> str:
        return f"{self.ns}:in_progress_identities"

    def process(self, identity: str) -> str:
        return f"{self.ns}:process:{identity}"

    @property
    def processes(self) -> str:
        return f"{self.ns}:processes"

    @property
    def last_beat(self) -> str:
        return f"{self.ns}:last_beat"

    @property
    def beating_since(self) -> str:
        """identity → when its current unbroken run of beats began (Redis's clock).

        Orphan recovery trusts a judge only once it has beaten without a gap
        longer than ``heartbeat_ttl`` for at least ``orphan_threshold``.
        """
        return f"{self.ns}:beating_since"

    @property
    def beats(self) -> str:
        """Sorted set: identity -> its last beat (Redis's clock), beside ``last_beat``.

        An index for orphan recovery: a pass reads only the identities whose
        last beat is overdue (ZRANGEBYSCORE), not every registered one. The
        verdict stays requeue.lua's, on ``last_beat`` and presence.
        """
        return f"{self.ns}:beats"

    @property
    def live_queues(self) -> str:
        return f"{self.ns}:live_queues"

    def signals(self, identity: str) -> str:
        """Remote-control signals for one process ("quiet", "stop"), read on each beat."""
        return f"{self.ns}:signals:{identity}"

    def workers(self, identity: str) -> str:
        return f"{self.ns}:workers:{identity}"

    def orphanings(self, jid: str) -> str:
        return f"{self.ns}:orphanings:{jid}"

    @property
    def orphanings_prefix(self) -> str:
        return f"{self.ns}:orphanings:"

    @property
    def repeat_orphans(self) -> str:
        return f"{self.ns}:repeat_orphans"

    @property
    def unsettled(self) -> str:
        return f"{self.ns}:unsettled"

    @property
    def recovery_lock(self) -> str:
        return f"{self.ns}:recovery_lock"

    # --- stats ----------------------------------------------------------------
    @property
    def stats_processed(self) -> str:
        return f"{self.ns}:stats:processed"

    @property
    def stats_failed(self) -> str:
        return f"{self.ns}:stats:failed"

    def stats_processed_on(self, day: str) -> str:
        return f"{self.ns}:stats:processed:{day}"

    def stats_failed_on(self, day: str) -> str:
        return f"{self.ns}:stats:failed:{day}"

    def history(self, minute: int) -> str:
        """The metrics history of one minute (epoch minute): a hash, kept a few hours."""
        return f"{self.ns}:history:{minute}"

    @property
    def history_prefix(self) -> str:
        return f"{self.ns}:history:"

    def stat(self, name: str) -> str:
        """A named counter beside processed/failed (recovered, parked, ...)."""
        return f"{self.ns}:stats:{name}"

    # --- features -------------------------------------------------------------
    def unique(self, digest: str) -> str:
        return f"{self.ns}:unique:{digest}"

    def periodic(self, suffix: str) -> str:
        return f"{self.ns}:periodic:{suffix}"

    def periodic_running(self, name: str) -> str:
        """An overlap=False entry's running lock; value: the jid of the run holding it."""
        return f"{self.ns}:periodic:running:{name}"

    @property
    def periodic_running_prefix(self) -> str:
        return f"{self.ns}:periodic:running:"

    @property
    def limits_prefix(self) -> str:
        """``<ns>:limits:``: a concurrency limit's running jobs are the set
        ``<ns>:limits:<key>``; its bookkeeping keys start ``<ns>:limits:~``."""
        return f"{self.ns}:limits:"

    def limit_slots(self, key: str) -> str:
        return f"{self.ns}:limits:{key}"

    def limit_parked(self, key: str) -> str:
        """The jobs held back by the limit ``key``, oldest at the tail (a list)."""
        return f"{self.ns}:limits:~parked:{key}"

    def limit_window(self, key: str) -> str:
        """A window limit's starts (a sorted set scored by ms; a sliding log)."""
        return f"{self.ns}:limits:~window:{key}"

    def limit_bucket(self, key: str) -> str:
        """A token bucket's state (a hash: t = tokens, at = ms of the last take)."""
        return f"{self.ns}:limits:~bucket:{key}"

    def limit_leaky(self, key: str) -> str:
        """A leaky bucket's next allowed start, ms (a string; GCRA's TAT)."""
        return f"{self.ns}:limits:~leaky:{key}"

    def limit_points(self, key: str) -> str:
        """A points limit's budget (a hash: t = points, at = ms of the last change)."""
        return f"{self.ns}:limits:~points:{key}"

    def limit_pause(self, key: str) -> str:
        """A limit key paused by ``limits.BackOff`` (a string with the pause's TTL)."""
        return f"{self.ns}:limits:~pause:{key}"

    @property
    def limits_paused(self) -> str:
        """Set beside every ``limit_pause`` and kept at least as long (a string
        with a TTL): while it is absent no key is paused, so a fetch or an ack
        asks no key of a pause (``includes/holds.lua``, ``any_paused``)."""
        return f"{self.ns}:limits:~paused"

    def limit_admitted(self, bucket: int | str) -> str:
        """Admissions per limit key in one 10 s bucket of Redis's clock (a hash:
        key -> admissions, kept 30 s; ``bucket`` = ms // 10,000): admitted/s."""
        return f"{self.ns}:limits:~admitted:{bucket}"

    @property
    def limit_due(self) -> str:
        """Window limits with held jobs: key -> when it reopens (ms; a sorted set)."""
        return f"{self.ns}:limits:~due"

    @property
    def limit_windows(self) -> str:
        """Each due window limit's "n period_ms" (a hash), for ``limits_due.lua``."""
        return f"{self.ns}:limits:~windows"

    @property
    def limits_used(self) -> str:
        """Set (never cleared) before the first job with limits is written: the
        fetch checks taken jobs for limits only when it exists, so a namespace
        without limits pays one EXISTS a fetch, nothing a job."""
        return f"{self.ns}:limits:~used"

    @property
    def fair_used(self) -> str:
        """Set (never cleared) before the first fair job is written: the fetch
        looks for fair jobs and serves fair keys only when it exists."""
        return f"{self.ns}:limits:~fair"

    def fair_base(self, queue: str) -> str:
        """Queue ``queue``'s fair keys (a hash: key -> weight, ``~turn`` -> the
        current key's jobs left in its turn, ``~fed`` -> the job fed back onto
        the queue for a blocking wait); its key ring is ``<base>:~ring`` (a
        list, the key whose turn it is at the tail) and a key's jobs wait on
        ``<base>:<key>`` (a list, oldest at the tail). Queue names hold no ``:``."""
        return f"{self.ns}:limits:~fair:{queue}"

    def fair_ring(self, queue: str) -> str:
        return f"{self.ns}:limits:~fair:{queue}:~ring"

    def fair_jobs(self, queue: str, key: str) -> str:
        return f"{self.ns}:limits:~fair:{queue}:{key}"

    @property
    def limit_config(self) -> str:
        """Limits set at run time (``limits set``): key -> limit (a hash)."""
        return f"{self.ns}:limits:~config"

    @property
    def tracking_prefix(self) -> str:
        """``<ns>:``, from which ``includes/job_end.lua`` names a job's status, result,
        result_gone and result_ready exactly as the methods below do."""
        return f"{self.ns}:"

    def periodic_claim(self, name: str, slot: str) -> str:
        """One slot's claim (a string, kept a few of the entry's intervals): keyed by the
        entry's name and the slot's time only, so two versions of an entry live at once
        (a rolling deploy) claim the same key."""
        return f"{self.ns}:periodic:claim:{name}:{slot}"

    def periodic_claim_before_21(self, name: str, digest: str, slot: str) -> str:
        """A slot's claim as releases before issue 21 wrote it (with the definition's
        hash): still checked and written while such processes may be live, so the
        upgrade's own rolling deploy runs each slot once. Remove a release later."""
        return f"{self.ns}:periodic:claim:{name}:{digest}:{slot}"

    @property
    def periodic_last(self) -> str:
        """Entry name -> the last slot claimed (epoch seconds; only moves forward)."""
        return f"{self.ns}:periodic:last"

    @property
    def periodic_entries(self) -> str:
        """Entry name -> its published definition (JSON), for `periodic list`."""
        return f"{self.ns}:periodic:entries"

    @property
    def periodic_paused(self) -> str:
        """Names of periodic entries paused at run time: their slots are skipped by
        every ticker until resumed (a set, as ``paused`` is for queues)."""
        return f"{self.ns}:periodic:paused"

    @property
    def periodic_results(self) -> str:
        """Entry name -> its last run's outcome (JSON), for `periodic list`."""
        return f"{self.ns}:periodic:results"

    @property
    def after_prefix(self) -> str:
        """Jobs enqueued ``.options(after=[...])``: ``<prefix><jid>`` is the set of
        jobs waiting on job ``jid``; ``~waiting`` (hash jid -> payload) and
        ``~left`` (hash jid -> prerequisites not ended) hold the waiting jobs."""
        return f"{self.ns}:after:"

    @property
    def after_waiting(self) -> str:
        return f"{self.ns}:after:~waiting"

    @property
    def after_left(self) -> str:
        return f"{self.ns}:after:~left"

    def after_edges(self, jid: str) -> str:
        return f"{self.ns}:after:{jid}"

    def batch(self, bid: str) -> str:
        """A batch (a hash: state, counts, callbacks); also the key of a member's
        batch hold (``holds.BATCH``), its prefix ``batch_prefix``."""
        return f"{self.ns}:batch:{bid}"

    @property
    def batch_prefix(self) -> str:
        return f"{self.ns}:batch:"

    def batch_pending(self, bid: str) -> str:
        """A batch's members that have not ended: a set of jids (``b:<bid>`` for a
        child batch). Under its own prefix, so no payload can name it as a hold."""
        return f"{self.ns}:batch_pending:{bid}"

    def batch_results(self, bid: str) -> str:
        """The jids of a batch's members that keep a result, in the order they were
        added (a list): where ``batch_results`` finds their results, each at its own
        ``result`` key. Kept as long as the batch once it is done."""
        return f"{self.ns}:batch_results:{bid}"

    @property
    def batch_stats(self) -> str:
        """The namespace's batch counters (a hash of totals; Prometheus reads it)."""
        return f"{self.ns}:stats:batches"

    @property
    def batches(self) -> str:
        """Every batch's bid, scored by when it was opened (``batches list``)."""
        return f"{self.ns}:batches"

    def status(self, jid: str) -> str:
        return f"{self.ns}:status:{jid}"

    def result(self, jid: str) -> str:
        """A kept result: a one-element list (so a waiter can BLMOVE it onto itself), TTL."""
        return f"{self.ns}:result:{jid}"

    def result_gone(self, jid: str) -> str:
        """Outlives its result by as long again (a day at most): a waiter tells
        "expired" from "not done yet"."""
        return f"{self.ns}:result_gone:{jid}"

    def result_ready(self, jid: str) -> str:
        """A pub/sub channel, not a key: published as the job's result is written."""
        return f"{self.ns}:result_ready:{jid}"

    @property
    def aborted(self) -> str:
        """Abort tombstones: a sorted set, jid -> when it was aborted (pruned after an hour).

        Every worker checks the jobs it runs against it with its heartbeat, so an
        abort sent while its listener was cut off still arrives.
        """
        return f"{self.ns}:aborted"

    @property
    def aborts(self) -> str:
        """The pub/sub channel an abort of a running job is announced on (its jid)."""
        return f"{self.ns}:aborts"

    def quarantine(self, key: str) -> str:
        return f"{self.ns}:quarantine:{key}"

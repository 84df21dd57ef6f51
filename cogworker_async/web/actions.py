"""The actions: each a POST (past the ``Guard``) that changes one thing, then shows the page again.

Retry moves an entry with ``enqueue_entry.lua`` and kill with
``kill_entry.lua``: one atomic step each, so two tabs retrying the same dead
job move (and run) it once; the second is told it was already gone.
"""

from __future__ import annotations

import time

import orjson
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cogworker_async import api
from cogworker_async.api import browsing
from cogworker_async.api.sets import enqueue_now, matches, scan_entries
from cogworker_async.settings import check_queue_name
from cogworker_async.store import admin
from cogworker_async.store.faults import is_wrong_type
from cogworker_async.web import params
from cogworker_async.web.pages import UI, back, first, form, redis_of, render, segment, ui_of
from cogworker_async.web.views import SETS

SET_ACTIONS = ("retry", "delete", "kill")


def _bad(request: Request, problem: str) -> Response:
    return render(request, "error.html", status_code=400, problem=problem, page="")


async def _not_done(
    request: Request, exc: ResponseError | None, expected: dict[str, str]
) -> Response:
    """A 409 naming the key of the wrong type that stopped an action (kept as it is, for
    the key guard or a human); ``exc`` (not WRONGTYPE) is raised again."""
    if exc is not None and not is_wrong_type(exc):
        raise exc
    problem = await browsing.wrong_typed(redis_of(request), expected) or str(exc)
    line = f"not done: {problem} (left as it is for a human to look at)"
    return render(request, "error.html", status_code=409, problem=line, page="")


async def signal(request: Request) -> Response:
    """Quiet or stop one process (``identity``) or every live one (``all``)."""
    ui = ui_of(request)
    fields = await form(request)
    name = first(fields, "signal")
    if name not in api.SIGNALS:
        return _bad(request, f"unknown signal {name!r}")
    redis = redis_of(request)
    if first(fields, "all"):
        targets = [p.identity for p in await api.processes(redis, ui.keys) if p.alive]
    else:
        targets = [first(fields, "identity")]
    sent = 0
    for target in filter(None, targets):
        try:
            sent += await api.send_signal(redis, ui.keys, target, name)
        except ResponseError as exc:
            return await _not_done(request, exc, {ui.keys.signals(target): "list"})
    return back(
        request, "/busy", f"sent {name} to {sent} process(es) (acted on at their next beat)"
    )


async def queue_action(request: Request) -> Response:
    ui = ui_of(request)
    name = request.path_params["name"]
    verb = request.path_params["verb"]
    try:
        check_queue_name(name)
    except ValueError as exc:
        return _bad(request, str(exc))
    fields = await form(request)
    redis = redis_of(request)
    if verb in ("pause", "resume"):
        act = api.pause if verb == "pause" else api.resume
        try:
            done = await act(redis, ui.keys, name)
        except api.UnknownQueueError as exc:
            return _bad(request, str(exc))
        note = f"{verb}d {name}" if done else f"could not {verb} {name} (a key of the wrong type)"
        return back(request, "/queues", note)
    if verb == "clear":
        if first(fields, "confirm") != name:
            return _bad(request, f"not cleared: type the queue's name ({name}) to confirm")
        removed = await api.clear_queue(redis, ui.keys, name)
        return back(request, "/queues", f"cleared {removed} job(s) from {name}")
    if verb == "delete":
        near = params.integer(
            "index", first(fields, "index"), default=0, low=0, high=params.MAX_INDEX
        )
        try:
            gone = await browsing.delete_queued(redis, ui.keys, name, first(fields, "ref"), near)
        except ResponseError as exc:
            return await _not_done(request, exc, {ui.keys.queue(name): "list"})
        note = "deleted 1 job" if gone else "not found: it was taken or deleted already"
        return back(request, f"/queues/{segment(name)}", note, order=first(fields, "order") or None)
    return _bad(request, f"unknown action {verb!r}")


async def _kill(
    redis: Redis, ui: UI, which: api.SetName, entries: list[api.Entry]
) -> tuple[int, str]:
    """Kill ``entries``; the note says how many moved, and how many dead entries the
    dead set's bounds (``dead_max_jobs``, ``dead_timeout``) dropped to make room."""
    source = api.set_key(ui.keys, which)
    before = int(await redis.zcard(ui.keys.dead))
    killed = 0
    for e in entries:
        now = time.time()
        dead = e.raw
        if e.job is not None:
            dead = orjson.dumps({**e.job, "failed_at": e.job.get("failed_at") or now})
        killed += await admin.kill_entry(
            redis,
            ui.keys,
            source=source,
            entry=e.raw,
            dead_entry=dead,
            now=now,
            dead_max_jobs=ui.settings.dead_max_jobs,
            dead_timeout=ui.settings.dead_timeout,
        )
    # Counted around the moves: a worker filing a failure meanwhile makes it an
    # undercount, never a claim that something was dropped when it was not.
    dropped = before + killed - int(await redis.zcard(ui.keys.dead))
    note = f"moved {killed} to dead"
    if dropped > 0:
        note += (
            f"; dropped {dropped} of the oldest dead entries (dead keeps at most "
            f"{ui.settings.dead_max_jobs}, none older than {ui.settings.dead_timeout:g} s)"
        )
    return killed, note


async def _matching(redis: Redis, ui: UI, which: api.SetName, needle: str) -> list[api.Entry]:
    """Every entry matching ``needle`` (an action on "all matching" walks the whole set)."""
    key = api.set_key(ui.keys, which)
    lowered = needle.lower()
    return [e async for e in scan_entries(redis, key, None) if matches(e, lowered)]


async def set_action(request: Request) -> Response:
    """Retry now, delete or kill the selected entries, or every entry matching the search."""
    ui = ui_of(request)
    segment_name = request.path_params["segment"]
    if segment_name not in SETS:
        return _bad(request, f"no set {segment_name!r}")
    which = SETS[segment_name][0]
    fields = await form(request)
    action = first(fields, "action")
    if action not in SET_ACTIONS or (action == "kill" and which == "dead"):
        return _bad(request, f"unknown action {action!r} here")
    refs = [params.entry_ref(token) for token in fields.get("ref", [])]
    source = api.set_key(ui.keys, which)
    # The sets an action reads or fills: one of another type is named, and kept.
    expected = {source: "zset", ui.keys.dead: "zset"} if action == "kill" else {source: "zset"}
    redis = redis_of(request)
    if await browsing.wrong_typed(redis, expected) is not None:
        return await _not_done(request, None, expected)
    try:
        note = await _act(redis, ui, which, action, fields, refs)
    except ResponseError as exc:
        return await _not_done(request, exc, expected)
    needle = first(fields, "q").strip()
    return back(request, f"/{segment_name}", note, q=needle or None)


async def _act(
    redis: Redis,
    ui: UI,
    which: api.SetName,
    action: str,
    fields: dict[str, list[str]],
    refs: list[browsing.Ref],
) -> str:
    """Do ``action`` on the entries ``refs`` names, or on all (matching ``q``): the note."""
    needle = first(fields, "q").strip()
    source = api.set_key(ui.keys, which)
    if first(fields, "all"):
        if not needle and action == "delete":
            return f"deleted {await api.delete_all(redis, ui.keys, which)}"
        if not needle and action == "retry":
            return f"moved {await api.retry_all(redis, ui.keys, which)} onto their queues"
        entries = await _matching(redis, ui, which, needle) if needle else []
        if not needle and action == "kill":
            entries = [e async for e in scan_entries(redis, source, None)]
    else:
        entries = await browsing.find_entries(redis, ui.keys, which, refs)
    if action == "retry":
        done = 0
        for e in entries:
            done += await enqueue_now(redis, ui.keys, source, e)
        note = f"moved {done} onto their queues"
    elif action == "delete":
        done = await api.delete(redis, ui.keys, which, [e.ref for e in entries])
        note = f"deleted {done}"
    else:
        done, note = await _kill(redis, ui, which, entries)
    skipped = len(refs) - done if not first(fields, "all") else 0
    if skipped > 0:
        note += f"; {skipped} already gone or not runnable"
    return note


async def periodic_run(request: Request) -> Response:
    ui = ui_of(request)
    name = first(await form(request), "name")
    redis = redis_of(request)
    try:
        jid = await api.run_periodic_now(redis, ui.keys, name)
    except ValueError as exc:  # an unreadable published definition
        return back(request, "/periodic", str(exc))
    except ResponseError as exc:
        return await _not_done(request, exc, await _periodic_keys(redis, ui, name))
    note = f"enqueued {name} now as {jid}" if jid else f"no periodic entry {name!r}"
    return back(request, "/periodic", note)


async def periodic_pause(request: Request) -> Response:
    """Pause a periodic entry: every worker skips its slots until it is resumed."""
    return await _pause_or_resume(request, "pause")


async def periodic_resume(request: Request) -> Response:
    return await _pause_or_resume(request, "resume")


async def _pause_or_resume(request: Request, verb: str) -> Response:
    ui = ui_of(request)
    name = first(await form(request), "name")
    act = api.pause_periodic if verb == "pause" else api.resume_periodic
    redis = redis_of(request)
    try:
        done = await act(redis, ui.keys, name)
    except ResponseError as exc:
        keys = {ui.keys.periodic_paused: "set", ui.keys.periodic_entries: "hash"}
        return await _not_done(request, exc, keys)
    if done is None:
        return _bad(request, f"no periodic entry {name!r}")
    state = "paused" if verb == "pause" else "running"
    note = f"{verb}d {name}" if done else f"{name} was already {state}"
    return back(request, "/periodic", note)


async def _periodic_keys(redis: Redis, ui: UI, name: str) -> dict[str, str]:
    """The keys running entry ``name`` now touches, with their types: the published
    definitions, the queues set and (when the definition says) the entry's queue."""
    entries = ui.keys.periodic("entries")
    expected = {entries: "hash", ui.keys.queues: "set"}
    try:
        definition = orjson.loads(await redis.hget(entries, name) or b"{}")
    except (ResponseError, orjson.JSONDecodeError):  # wrong-typed or unreadable: named as is
        return expected
    queue = definition.get("queue") if isinstance(definition, dict) else None
    if isinstance(queue, str) and queue:
        expected[ui.keys.queue(queue)] = "list"
    return expected


async def lock_delete(request: Request) -> Response:
    ui = ui_of(request)
    key = first(await form(request), "key")
    try:
        gone = await api.delete_lock(redis_of(request), ui.keys, key)
    except ValueError as exc:
        return back(request, "/locks", str(exc))
    return back(request, "/locks", gone or f"no lock {key!r}")


async def locks_delete_orphaned(request: Request) -> Response:
    ui = ui_of(request)
    deleted = await api.delete_orphaned(redis_of(request), ui.keys)
    return back(request, "/locks", f"deleted {len(deleted)} orphaned lock(s)")


def routes() -> list[BaseRoute]:
    return [
        Route("/busy/signal", signal, methods=["POST"]),
        Route("/queues/{name}/{verb}", queue_action, methods=["POST"]),
        Route("/{segment}/action", set_action, methods=["POST"]),
        Route("/periodic/run", periodic_run, methods=["POST"]),
        Route("/periodic/pause", periodic_pause, methods=["POST"]),
        Route("/periodic/resume", periodic_resume, methods=["POST"]),
        Route("/locks/delete", lock_delete, methods=["POST"]),
        Route("/locks/delete-orphaned", locks_delete_orphaned, methods=["POST"]),
    ]

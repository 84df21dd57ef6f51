"""The actions: each a POST (past the ``Guard``) that changes one thing, then shows the page again.

Retry moves an entry with ``enqueue_entry.lua`` and kill with
``kill_entry.lua``: one atomic step each, so two tabs retrying the same dead
job move (and run) it once; the second is told it was already gone.
"""

from __future__ import annotations

import time

import orjson
from redis.asyncio import Redis
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from cogworker_async import api
from cogworker_async.api.sets import _enqueue, _matches, _scan
from cogworker_async.settings import check_queue_name
from cogworker_async.store import admin
from cogworker_async.web import reads
from cogworker_async.web.app import UI, back, first, form, redis_of, render, ui_of
from cogworker_async.web.views import SETS

SET_ACTIONS = ("retry", "delete", "kill")


def _bad(request: Request, problem: str) -> Response:
    return render(request, "error.html", status_code=400, problem=problem, page="")


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
    sent = sum([await api.send_signal(redis, ui.keys, t, name) for t in targets if t])
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
        try:
            near = max(0, int(first(fields, "index", "0")))
        except ValueError:
            near = 0
        gone = await reads.delete_queued(redis, ui.keys, name, first(fields, "ref"), near)
        note = "deleted 1 job" if gone else "not found: it was taken or deleted already"
        return back(request, f"/queues/{name}", note, order=first(fields, "order") or None)
    return _bad(request, f"unknown action {verb!r}")


async def _kill(redis: Redis, ui: UI, which: api.SetName, entries: list[api.Entry]) -> int:
    source = api.set_key(ui.keys, which)
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
    return killed


async def _matching(redis: Redis, ui: UI, which: api.SetName, needle: str) -> list[api.Entry]:
    """Every entry matching ``needle`` (an action on "all matching" walks the whole set)."""
    key = api.set_key(ui.keys, which)
    lowered = needle.lower()
    return [e async for e in _scan(redis, key, None) if _matches(e, lowered)]


async def set_action(request: Request) -> Response:
    """Retry now, delete or kill the selected entries, or every entry matching the search."""
    ui = ui_of(request)
    segment = request.path_params["segment"]
    if segment not in SETS:
        return _bad(request, f"no set {segment!r}")
    which = SETS[segment][0]
    fields = await form(request)
    action = first(fields, "action")
    if action not in SET_ACTIONS or (action == "kill" and which == "dead"):
        return _bad(request, f"unknown action {action!r} here")
    needle = first(fields, "q").strip()
    redis = redis_of(request)
    if first(fields, "all"):
        if not needle and action == "delete":
            done = await api.delete_all(redis, ui.keys, which)
            return back(request, f"/{segment}", f"deleted {done}")
        if not needle and action == "retry":
            done = await api.retry_all(redis, ui.keys, which)
            return back(request, f"/{segment}", f"moved {done} onto their queues")
        entries = await _matching(redis, ui, which, needle) if needle else []
        if not needle and action == "kill":
            entries = [e async for e in _scan(redis, api.set_key(ui.keys, which), None)]
    else:
        entries = await reads.find_entries(redis, ui.keys, which, fields.get("ref", []))
    if action == "retry":
        done = 0
        for e in entries:
            done += await _enqueue(redis, ui.keys, api.set_key(ui.keys, which), e)
        note = f"moved {done} onto their queues"
    elif action == "delete":
        done = await api.delete(redis, ui.keys, which, [e.ref for e in entries])
        note = f"deleted {done}"
    else:
        done = await _kill(redis, ui, which, entries)
        note = f"moved {done} to dead"
    skipped = len(fields.get("ref", [])) - done if not first(fields, "all") else 0
    if skipped > 0:
        note += f"; {skipped} already gone or not runnable"
    return back(request, f"/{segment}", note, q=needle or None)


async def periodic_run(request: Request) -> Response:
    ui = ui_of(request)
    name = first(await form(request), "name")
    try:
        jid = await api.run_periodic_now(redis_of(request), ui.keys, name)
    except ValueError as exc:  # an unreadable published definition
        return back(request, "/periodic", str(exc))
    note = f"enqueued {name} now as {jid}" if jid else f"no periodic entry {name!r}"
    return back(request, "/periodic", note)


async def lock_delete(request: Request) -> Response:
    ui = ui_of(request)
    key = first(await form(request), "key")
    try:
        gone = await api.delete_lock(redis_of(request), ui.keys, key)
    except ValueError as exc:
        return back(request, "/locks", str(exc))
    return back(request, "/locks", f"deleted {key}" if gone else f"no lock {key!r}")


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
        Route("/locks/delete", lock_delete, methods=["POST"]),
        Route("/locks/delete-orphaned", locks_delete_orphaned, methods=["POST"]),
    ]
